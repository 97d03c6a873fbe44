"""Shared and DRA flavors billed as the field runs them.

A time-sliced or MPS share is 1/replicas of a GPU: without a rate card of its own it costs its whole GPU's rate ×
that exact fraction. A DRA pod requests no extended resource, so its devices are counted from dcgm-exporter's DRA
pod mapping (`dra_claim_namespace`, `dra_driver_name`, ... on the device series: dcgm-exporter 4.5.3-4.8.2
internal/pkg/transformation/kubernetes.go), here from a real Prometheus in both scrape shapes.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing import selectors, services
from billing.devices import flavor_unit
from billing.metrics import PrometheusSource
from billing.models import UsageHour
from tenants.choices import Sharing
from tests import prometheus
from tests.billing.test_selectors import AFTER_NOV, NOV, START, at
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    RateCardFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UsageHourFactory,
)
from tests.requires import unavailable

pytestmark = pytest.mark.django_db
T4, H100 = "Tesla T4", "NVIDIA H100 80GB HBM3"


def test_a_share_costs_its_gpus_rate_times_its_exact_fraction():
    cluster = ClusterFactory()
    whole = GpuFlavorFactory(cluster=cluster, name="t4", gpu_model=T4)
    mps = GpuFlavorFactory(cluster=cluster, name="t4-mps", gpu_model=T4, sharing=Sharing.MPS, replicas=4,
                           resource_name="nvidia.com/gpu.shared", node_labels={})
    sliced = GpuFlavorFactory(cluster=cluster, name="t4-ts", gpu_model=T4, sharing=Sharing.TIME_SLICED, replicas=3,
                              node_labels={"pool": "ts"})
    RateCardFactory(flavor=whole, price_per_gpu_hour=Decimal("0.60"), effective_from=START)
    team = TeamFactory()
    UsageHourFactory(team=team, flavor=mps, hour=at(1), allocated_gpu_hours=8, used_gpu_hours=8)
    UsageHourFactory(team=team, flavor=sliced, hour=at(2), allocated_gpu_hours=3, used_gpu_hours=3)

    lines = {line.flavor.name: line for line in selectors.team_statement(team=team, month=NOV, now=AFTER_NOV).lines}

    assert (lines["t4-mps"].unit_price, lines["t4-mps"].price_from, lines["t4-mps"].cost) == (
        Decimal("0.15"), "t4", Decimal("1.20"))  # 8 quarter-GPU hours are two GPU-hours
    assert lines["t4-ts"].cost == Decimal("0.60")  # three thirds of a GPU for an hour cost one GPU-hour


def _dcgm(hour: datetime, shape: str, namespace: str) -> dict:
    """Two H100s held by one claim in `alpha` for the first half hour, one for the whole hour; a third device free;
    dcgm-exporter every 15 s. With honorLabels false the target's namespace is the exporter's."""
    def samples(minutes):
        return [((hour + timedelta(minutes=m, seconds=s)).timestamp(), 300.0)
                for m in minutes for s in (7.5, 22.5, 37.5, 52.5)]

    series = []
    for device, minutes in (("gpu-0", range(-5, 60)), ("gpu-1", range(-5, 30)), ("gpu-2", range(-5, 60))):
        labels = {"modelName": H100, "UUID": f"GPU-{device}", "gpu": device[-1], "Hostname": "node-1"}
        held = device != "gpu-2"
        if held:
            pod = {"pod": "train-7-worker-0", "namespace": namespace, "container": "worker"}
            if shape == "exported":
                pod = {f"exported_{k}": v for k, v in pod.items()} | {"namespace": "gpu-operator",
                                                                      "pod": "dcgm-exporter-x"}
            labels |= pod | {"dra_claim_name": "train-7-worker-0-gpus-x", "dra_claim_namespace": namespace,
                             "dra_driver_name": "gpu.nvidia.com", "dra_pool_name": "node-1",
                             "dra_device_name": device}
        series.append((labels, samples(minutes)))
    phase = [({"namespace": namespace, "pod": "train-7-worker-0", "uid": "u1", "phase": "Running"},
              [((hour + timedelta(minutes=m, seconds=s)).timestamp(), 1.0) for m in range(-5, 60) for s in (15, 45)])]
    return {"DCGM_FI_DEV_POWER_USAGE": series, "kube_pod_status_phase": phase}


@pytest.mark.parametrize("shape", ["direct", "exported"])
def test_dra_device_hours_come_from_the_dcgm_series_of_the_claims_namespace(tmp_path, shape):
    if prometheus.binaries() is None:
        unavailable("prometheus/promtool are not installed (Debian package 'prometheus')")
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    cluster = ClusterFactory(name=f"dra-{shape}")
    team = TeamFactory(slug="alpha")
    path = tmp_path / "series.om.txt"
    prometheus.write_openmetrics(path, _dcgm(hour, shape, team.namespace))
    TeamNamespaceFactory(team=team, cluster=cluster)
    flavor = GpuFlavorFactory(cluster=cluster, name="h100-dra", gpu_model=H100, sharing=Sharing.DRA,
                              device_class="gpu.nvidia.com", resource_name="gpu.nvidia.com/devices", node_labels={})
    with prometheus.prometheus_server(path) as url:
        usage = PrometheusSource(url).hour_usage(hour)
        services.usage_collect_hour(cluster=cluster, hour=hour, source=PrometheusSource(url))

    key = (team.namespace, flavor_unit(flavor), H100)
    assert usage.namespaces[key].allocated_gpu_hours == pytest.approx(1.5, abs=1e-9)  # 1 h + ½ h
    (row,) = UsageHour.objects.filter(cluster=cluster, hour=hour)
    assert (row.team, row.flavor, row.allocated_gpu_hours) == (team, flavor, Decimal("1.500000"))


def test_the_demo_source_counts_the_devices_of_a_pods_claims_and_leaves_other_pods_alone():
    """A DRA pod names its generated claim in status.resourceClaimStatuses; the claim's allocation results (one per
    device, each naming its request, whose ExactDeviceRequest names the class) are the devices it holds (kubernetes
    v1.34 staging/src/k8s.io/api/resource/v1/types.go)."""
    from billing import devices, metrics
    from composition.demo import usage as sandbox_usage

    def pod(name, **status):
        return {"metadata": {"namespace": "team-a", "name": name, "labels": {metrics.JOB_LABEL: "train"}},
                "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}
                                         if name == "plain" else {"claims": [{"name": "gpus"}]}}]},
                "status": {"phase": "Running", "startTime": "2026-01-01T10:00:00Z", **status}}

    claim = {"metadata": {"namespace": "team-a", "name": "train-0-gpus-abcde"},
             "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                                               {"name": "other", "exactly": {"deviceClassName": "fpga.example.com"}}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "node-1", "device": f"gpu-{i}"}
                 for i in range(2)] + [{"request": "other", "driver": "fpga.example.com", "pool": "n",
                                       "device": "f"}]}}}}
    unit = devices.dra_unit("gpu.nvidia.com")
    held = devices.claim_devices([claim], {"gpu.nvidia.com": (unit, H100, 80.0)})
    pods = [pod("train-0", resourceClaimStatuses=[{"name": "gpus", "resourceClaimName": "train-0-gpus-abcde"}]),
            pod("plain"), pod("unallocated", resourceClaimStatuses=[{"name": "gpus", "resourceClaimName": "none"}])]
    runs = sandbox_usage.pod_runs(pods, models={("nvidia.com/gpu", ""): (H100, 80.0)}, claims=held)
    assert [(r.name, r.resource, r.gpus, r.gpu_model) for r in runs] == [
        ("train-0", unit, 2, H100), ("plain", "nvidia_com_gpu", 1, H100)]
    assert sandbox_usage.pod_runs(pods[1:2], models={("nvidia.com/gpu", ""): (H100, 80.0)}) == runs[1:]
    hour = sandbox_usage.SandboxSource(lambda: runs).hour_usage(runs[0].started_at)
    assert hour.namespaces[("team-a", unit, H100)].allocated_gpu_hours == 2
