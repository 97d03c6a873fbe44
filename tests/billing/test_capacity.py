"""Cluster capacity: what the exporters reported per flavor, what pods held and the priced, unallocated rest."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from billing import capacity
from billing.models import CapacityHour
from tenants.choices import Sharing
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    PlatformAdminFactory,
    RateCardFactory,
    TeamFactory,
    UsageHourFactory,
)
from tests.permissions import request_as

pytestmark = pytest.mark.django_db
NOV = date(2026, 11, 1)
START = datetime(2026, 11, 1, tzinfo=UTC)
H = timedelta(hours=1)


def _hour(flavor, hour, capacity, held):
    return CapacityHour.objects.create(cluster=flavor.cluster, flavor=flavor, hour=hour,
                                       capacity_gpu_hours=Decimal(capacity), allocated_gpu_hours=Decimal(held),
                                       unallocated_gpu_hours=Decimal(capacity) - Decimal(held))


@pytest.fixture
def east():
    cluster = ClusterFactory(name="east")
    h100 = GpuFlavorFactory(cluster=cluster, name="h100", gpu_model="NVIDIA H100 80GB HBM3")
    mig = GpuFlavorFactory(cluster=cluster, name="h100-1g", resource_name="nvidia.com/mig-1g.10gb",
                           sharing=Sharing.MIG, gpu_fraction=Decimal("0.1429"), gpu_model=h100.gpu_model)
    l40s = GpuFlavorFactory(cluster=cluster, name="l40s", gpu_model="NVIDIA L40S")  # no rate card
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("2.10"), effective_from=START - 30 * 24 * H)
    for i in range(10):
        _hour(h100, START + i * H, 8, "5.5")
        _hour(mig, START + i * H, 7, 3)
        _hour(l40s, START + i * H, 4, 1)
    return {"cluster": cluster, "h100": h100, "mig": mig, "l40s": l40s}


def test_unallocated_capacity_is_priced_per_flavor_and_adds_up_per_cluster(east):
    (cluster,) = capacity.cluster_capacity(month=NOV)
    lines = {line.flavor.name: line for line in cluster.lines}
    h100, mig, l40s = lines["h100"], lines["h100-1g"], lines["l40s"]
    assert (h100.capacity_gpu_hours, h100.allocated_gpu_hours, h100.unallocated_gpu_hours) == (80, 55, 25)
    assert h100.unallocated_cost == Decimal("52.50")
    # Four idle slices for ten hours at exactly a seventh of 2.10.
    assert (mig.unallocated_gpu_hours, mig.unit_price, mig.unallocated_cost) == (40, Decimal("0.30"), Decimal("12.00"))
    assert not l40s.priced and l40s.unallocated_cost == 0 and cluster.unpriced_gpu_hours == 30
    assert cluster.allocated_gpu_hours + cluster.unallocated_gpu_hours == cluster.capacity_gpu_hours == 190
    assert cluster.unallocated_cost == Decimal("64.50")


def test_the_console_shows_each_clusters_capacity_and_the_rate_cards_the_unpriced_hours(east, client):
    team = TeamFactory()
    UsageHourFactory(team=team, flavor=east["l40s"], hour=datetime.now(UTC).replace(minute=0, second=0,
                     microsecond=0) - H, allocated_gpu_hours=3, used_gpu_hours=1)
    admin = PlatformAdminFactory()
    body = request_as(client, admin, reverse("billing:console-usage") + "?month=2026-11").content.decode()
    assert 'id="cluster-capacity"' in body and "east total" in body and "64.50" in body
    assert 'id="console-unallocated"' in body

    body = request_as(client, admin, reverse("billing:console-rates")).content.decode()
    assert "Unpriced GPU-h in" in body and '<span class="bad">3.00</span>' in body
    assert "1/7 × the h100 rate" in body


def test_the_cluster_page_says_which_scrape_setup_the_series_showed(client):
    from billing.models import ClusterUsageSource

    cluster = ClusterFactory(name="east", usage_source__prometheus_url="http://prometheus.example:9090",
                             mig_strategy="single")
    admin = PlatformAdminFactory()
    url = reverse("tenants:cluster-detail", args=["east"])
    body = request_as(client, admin, url).content.decode()
    assert "single (nvidia.com/gpu on MIG-labelled nodes)" in body and "not seen yet" in body

    ClusterUsageSource.objects.filter(cluster=cluster).update(scrape_shape="direct", scrape_shape_seen="exported",
                                                              scrape_shape_seen_at=START)
    body = request_as(client, admin, url).content.decode()
    assert "the series show honorLabels: false (exported_namespace, exported_pod)" in body
    assert "does not match the setting" in body
