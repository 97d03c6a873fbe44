"""A spot pool beside a reserved one: two flavors with the same resource and GPU model, told apart by the labels of
the node each GPU is on (listed from the cluster), so each is counted and priced on its own."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from billing import nodes, services
from billing.choices import HourState
from billing.metrics import HOUR
from billing.models import CapacityHour, UsageHour
from composition.demo import usage as sandbox_usage
from composition.demo.usage import PodRun, SandboxSource
from tests.billing.test_collection import make_world
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    PlatformAdminFactory,
    RateCardFactory,
    TeamFactory,
    TeamNamespaceFactory,
)
from tests.permissions import request_as

pytestmark = pytest.mark.django_db
H100 = "NVIDIA H100 80GB HBM3"
PRODUCT = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
SPOT = {**PRODUCT, "gpu-portal.io/capacity": "spot"}
HOUR_0 = datetime(2026, 3, 2, 10, tzinfo=UTC)


@pytest.fixture
def east(sandbox):
    sandbox.add_node("east-r1-1", gpus=8, labels={**PRODUCT, "gpu-portal.io/capacity": "reserved"})
    sandbox.add_node("east-s1-1", gpus=8, labels=SPOT)
    cluster = ClusterFactory(name="gpu-east", server=sandbox.url)
    h100 = GpuFlavorFactory(cluster=cluster, name="h100", gpu_model=H100, capacity=8, node_labels=PRODUCT)
    spot = GpuFlavorFactory(cluster=cluster, name="h100-spot", gpu_model=H100, capacity=8, node_labels=SPOT, spot=True)
    for flavor, price in ((h100, "4.00"), (spot, "1.60")):
        RateCardFactory(flavor=flavor, price_per_gpu_hour=Decimal(price), effective_from=HOUR_0 - timedelta(days=30))
    team = TeamFactory(slug="nlp")
    TeamNamespaceFactory(team=team, cluster=cluster)
    runs = [PodRun(namespace=team.namespace, name="train-0", resource="nvidia_com_gpu", gpus=4, started_at=HOUR_0,
                   finished_at=None, gpu_model=H100, node="east-r1-1"),
            PodRun(namespace=team.namespace, name="spot-0", resource="nvidia_com_gpu", gpus=2,
                   started_at=HOUR_0 + timedelta(minutes=30), finished_at=None, gpu_model=H100, node="east-s1-1")]
    return {"cluster": cluster, "h100": h100, "spot": spot, "team": team, "runs": runs}


def test_the_most_specific_flavor_on_a_node_is_its_own():
    reserved, spot = (GpuFlavorFactory.build(name=n, node_labels=labels) for n, labels in (("h", PRODUCT),
                                                                                            ("s", SPOT)))
    assert nodes.flavor_on_node([reserved, spot], {**SPOT, "kubernetes.io/hostname": "n1"}) is spot
    assert nodes.flavor_on_node([reserved, spot], PRODUCT) is reserved
    assert nodes.flavor_on_node([reserved, spot], {"nvidia.com/gpu.product": "NVIDIA-L40S"}) is None
    assert nodes.flavor_on_node([reserved, spot], None) is None  # a node the cluster did not list


def test_spot_usage_and_capacity_land_on_the_spot_flavor_at_the_spot_rate(east, client):
    cluster = east["cluster"]
    node_capacity = sandbox_usage.cluster_node_capacity(cluster)
    assert node_capacity == {("nvidia_com_gpu", H100, "east-r1-1"): 8, ("nvidia_com_gpu", H100, "east-s1-1"): 8}
    source = SandboxSource(lambda: east["runs"], capacity=sandbox_usage.cluster_capacity(cluster),
                           node_capacity=node_capacity)
    ledger = services.usage_collect_hour(cluster=cluster, hour=HOUR_0, source=source, now=HOUR_0 + 2 * HOUR)

    assert ledger.state == HourState.COLLECTED and "matches" not in ledger.message
    usage = {r.flavor.name: r.allocated_gpu_hours for r in UsageHour.objects.select_related("flavor")}
    assert usage == {"h100": Decimal(4), "h100-spot": Decimal(1)}  # 2 GPUs for the last half hour
    seen = {r.flavor.name: (r.capacity_gpu_hours, r.allocated_gpu_hours, r.unallocated_gpu_hours)
            for r in CapacityHour.objects.select_related("flavor")}
    assert seen == {"h100": (8, 4, 4), "h100-spot": (8, 1, 7)}

    body = request_as(client, PlatformAdminFactory(), reverse("billing:console-usage") + "?month=2026-03"
                      ).content.decode()
    capacity = body[body.index('id="cluster-capacity"'):body.index('id="teams-heading"')]
    # Unallocated: 4 h100 GPU-hours at 4.00, 7 spot GPU-hours at 1.60 (not 28.00 at the on-demand rate).
    assert "<td>h100-spot</td>" in capacity and "1.6000" in capacity and "11.20" in capacity
    assert "16.00" in capacity and "27.20" in capacity
    # The team's cost: 4 × 4.00 + 1 × 1.60.
    assert "17.60" in body[body.index('id="team-costs"'):]


def test_nodes_that_cannot_be_listed_leave_the_hour_partial(east):
    cluster = east["cluster"]
    type(cluster).objects.filter(pk=cluster.pk).update(server="http://127.0.0.1:9")
    cluster.refresh_from_db()
    source = SandboxSource(lambda: east["runs"])
    ledger = services.usage_collect_hour(cluster=cluster, hour=HOUR_0, source=source, now=HOUR_0 + 2 * HOUR)
    assert ledger.state == HourState.PARTIAL
    assert "listing the nodes of gpu-east failed" in ledger.message
    # Until the nodes can be read, the spot hours are counted as the first flavor, and the ledger says so.
    assert "matches 2 flavors: counted as h100" in ledger.message
    assert {r.flavor.name for r in UsageHour.objects.select_related("flavor")} == {"h100"}


@pytest.mark.parametrize("pool", ["spot", "reserved"])
def test_prometheus_series_are_told_apart_by_the_labels_of_their_node(prometheus_data, sandbox, pool):
    """The real Prometheus scenario's H100 node, labelled as either pool: its GPUs go to that pool's flavor."""
    url, scenario = prometheus_data
    world = make_world(url)
    cluster, h100 = world["cluster"], world["flavors"]["h100"]
    type(cluster).objects.filter(pk=cluster.pk).update(server=sandbox.url)
    cluster.refresh_from_db()
    type(h100).objects.filter(pk=h100.pk).update(node_labels=PRODUCT)
    GpuFlavorFactory(cluster=cluster, name="h100-spot", gpu_model=H100, node_labels=SPOT, spot=True)
    labels = SPOT if pool == "spot" else {**PRODUCT, "gpu-portal.io/capacity": pool}
    sandbox.add_node("node-h100", gpus=8, labels=labels)
    hour = scenario.hour(0)
    ledger = services.usage_collect_hour(cluster=cluster, hour=hour, now=hour + 2 * HOUR)

    assert "matches" not in ledger.message and "nodes" not in ledger.message, ledger.message
    expected = "h100-spot" if pool == "spot" else "h100"
    rows = UsageHour.objects.filter(hour=hour, flavor__gpu_model=H100).values_list("flavor__name", flat=True)
    assert set(rows) == {expected}
    capacity = CapacityHour.objects.get(hour=hour, flavor__gpu_model=H100)
    assert (capacity.flavor.name, capacity.capacity_gpu_hours) == (expected, 8)
