"""The cluster page's utilisation signal (with how to turn SM activity on) and the job page's activity per hour."""

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from billing import activity
from billing.choices import HourState
from billing.models import CollectedHour, JobUsageHour
from jobs.models import Job
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PriorityTierFactory,
    TeamFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
H = datetime(2026, 3, 2, 10, tzinfo=UTC)
DEFAULT_COUNTERS = [activity.GPU_UTIL, activity.GR_ENGINE_ACTIVE, activity.TENSOR_ACTIVE]


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


def _ledger(cluster, hour, signal, fields, state=HourState.COLLECTED):
    CollectedHour.objects.create(cluster=cluster, hour=hour, state=state, utilisation_signal=signal,
                                 activity_fields=fields, collected_at=hour + timedelta(hours=1))


def test_the_cluster_page_loads_the_signal_and_says_how_to_turn_sm_activity_on(client, staff):
    cluster = ClusterFactory(name="east")
    client.force_login(staff)
    page = client.get(reverse("tenants:cluster-detail", args=["east"])).content.decode()
    assert reverse("billing:cluster-signal", args=["east"]) in page

    fragment = client.get(reverse("billing:cluster-signal", args=["east"])).content.decode()
    assert "Not known yet" in fragment

    for i in range(3):
        _ledger(cluster, H + timedelta(hours=i), activity.GR_ENGINE_ACTIVE, DEFAULT_COUNTERS)
    _ledger(cluster, H + timedelta(hours=3), "", [], state=HourState.FAILED)  # a failed hour says nothing
    fragment = client.get(reverse("billing:cluster-signal", args=["east"])).content.decode()
    assert 'id="signal-time-based"' in fragment and "graphics engine activity (time-based)" in fragment
    assert "since 2026-03-02 10:00 UTC" in fragment and "newest hour collected: 2026-03-02 12:00" in fragment
    for line in activity.SM_ACTIVITY_LINES:
        assert line in fragment  # the exporter's exact CSV lines, uncommented
    assert "dcgmExporter:\n  config:\n    name: dcgm-exporter-metrics\n    create: true" in fragment
    assert "kind: ConfigMap" in fragment and "dcgm-metrics.csv: |" in fragment

    _ledger(cluster, H + timedelta(hours=4), activity.SM_ACTIVE, [*DEFAULT_COUNTERS, activity.SM_ACTIVE])
    fragment = client.get(reverse("billing:cluster-signal", args=["east"])).content.decode()
    assert "<strong>SM activity</strong>" in fragment and "since 2026-03-02 14:00 UTC" in fragment
    assert 'id="signal-time-based"' not in fragment and "DCGM_FI_PROF_SM_OCCUPANCY" not in fragment


def test_the_job_page_shows_sm_and_tensor_activity_per_hour(client):
    cluster = ClusterFactory(name="east")
    flavor = GpuFlavorFactory(cluster=cluster, name="h100")
    team, user = TeamFactory(slug="alpha"), UserFactory()
    MembershipFactory(team=team, user=user)
    job = Job.objects.create(team=team, cluster=cluster, flavor=flavor, priority_tier=PriorityTierFactory(),
                             kind="batch", name="train", image="ghcr.io/acme/train:1", submitted_by=user)
    hours = [  # (signal, utilisation, SM, tensor, memory GiB for 2 GPUs)
        (activity.GR_ENGINE_ACTIVE, 0.97, None, 0.6, 20.0),  # SM activity not exported yet
        (activity.SM_ACTIVE, 0.93, 0.93, 0.0, 20.0),  # busy, no tensor cores
        (activity.SM_ACTIVE, 0.0, 0.0, 0.0, 83.0),  # memory held, no work
    ]
    for i, (signal, used, sm, tensor, memory) in enumerate(hours):
        JobUsageHour.objects.create(job=job, flavor=flavor, hour=H + timedelta(hours=i), allocated_gpu_hours=2,
                                    used_gpu_hours=Decimal(2 * used), utilisation_avg=used, utilisation_signal=signal,
                                    sm_active_avg=sm, tensor_active_avg=tensor, gpu_memory_used_gib_avg=memory)
    client.force_login(user)
    page = client.get(reverse("jobs:job-detail", args=[job.pk])).content.decode()
    assert reverse("billing:job-activity", args=[job.pk]) in page

    fragment = client.get(reverse("billing:job-activity", args=[job.pk])).content.decode()
    rows = fragment.split("<tr>")[2:]
    assert len(rows) == 3
    assert "not exported" in rows[0] and "busy, but no tensor cores used" not in rows[0]
    assert "busy, but no tensor cores used" in rows[1] and '<meter min="0" max="1" value="0.930000">' in rows[1]
    assert "holds 41.5 GiB of memory per GPU but does no work" in rows[2]
    assert "a loop of tiny kernels reads busy" in fragment  # one hour was time-based
    chart = json.loads(re.search(r'data-chart-for="activity-chart">(.*?)</script>', fragment, re.S).group(1))
    assert [trace["name"] for trace in chart["data"]] == ["utilisation", "SM activity", "tensor pipe",
                                                          "memory per GPU (GiB)"]
    assert chart["data"][1]["y"] == [None, 93.0, 0.0] and chart["data"][3]["y"] == [10.0, 10.0, 41.5]

    client.force_login(UserFactory())  # of no team: another team's job is not found
    assert client.get(reverse("billing:job-activity", args=[job.pk])).status_code == 404


@pytest.mark.parametrize(("state", "started", "said"), [
    ("failed", False, "It never ran, so no GPU worked for it."),
    ("queued", False, "Shown once it runs and its first hour is collected."),
    ("running", True, "No hour of this job has been collected yet.")])
def test_a_job_without_collected_hours_says_why(client, state, started, said):
    cluster = ClusterFactory(name="east")
    team, user = TeamFactory(slug="alpha"), UserFactory()
    MembershipFactory(team=team, user=user)
    job = Job.objects.create(team=team, cluster=cluster, flavor=GpuFlavorFactory(cluster=cluster),
                             priority_tier=PriorityTierFactory(), kind="batch", name="train", image="x:1",
                             submitted_by=user, state=state, started_at=H if started else None)
    client.force_login(user)
    assert said in client.get(reverse("billing:job-activity", args=[job.pk])).content.decode()
