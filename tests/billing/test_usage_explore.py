"""The usage explorer: a team's GPU-hours over a range of whole UTC days, drilled down team → flavor → job → the
job's hours, every state its own URL; validated ranges, tenant scoping, and queries that do not grow with data."""

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.models import JobUsageHour, UsageHour
from jobs.models import Job
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
URL = "/teams/nlp/usage/explore/"


@pytest.fixture
def world(client):
    cluster = ClusterFactory(name="east")
    h100 = GpuFlavorFactory(cluster=cluster, name="h100")
    mig = GpuFlavorFactory(cluster=cluster, name="h100-1g", resource_name="nvidia.com/mig-1g.10gb", sharing="mig")
    team, other = TeamFactory(slug="nlp"), TeamFactory(slug="vision")
    for t in (team, other):
        TeamNamespaceFactory(team=t, cluster=cluster)
    user = UserFactory()
    MembershipFactory(team=team, user=user)
    tier = PriorityTierFactory()
    jobs = {name: Job.objects.create(team=team, cluster=cluster, flavor=h100, priority_tier=tier, kind="batch",
                                     name=name, image="ghcr.io/acme/t:1", submitted_by=user)
            for name in ("bert", "gpt")}
    theirs = Job.objects.create(team=other, cluster=cluster, flavor=h100, priority_tier=tier, kind="batch",
                                name="theirs", image="ghcr.io/acme/t:1", submitted_by=UserFactory())
    day = datetime.combine(timezone.now().date(), datetime.min.time(), tzinfo=UTC)
    # Today 10:00 and 11:00, and 10 days ago: h100 8 GPU-h an hour (bert 4, gpt 2, 2 outside jobs), MIG 7 slices.
    for hour in (day + timedelta(hours=10), day + timedelta(hours=11), day - timedelta(days=10, hours=-10)):
        UsageHour.objects.create(team=team, flavor=h100, cluster=cluster, namespace="nlp", hour=hour,
                                 allocated_gpu_hours=8, used_gpu_hours=6)
        UsageHour.objects.create(team=team, flavor=mig, cluster=cluster, namespace="nlp", hour=hour,
                                 allocated_gpu_hours=Decimal("1.0000"), used_gpu_hours=Decimal("0.5000"))
        UsageHour.objects.create(team=other, flavor=h100, cluster=cluster, namespace="vision", hour=hour,
                                 allocated_gpu_hours=64, used_gpu_hours=64)
        for job, allocated, used in ((jobs["bert"], 4, 3), (jobs["gpt"], 2, 2), (theirs, 64, 64)):
            JobUsageHour.objects.create(job=job, flavor=h100, hour=hour, allocated_gpu_hours=allocated,
                                        used_gpu_hours=used, utilisation_avg=used / allocated,
                                        gpu_memory_used_gib_avg=10 * allocated, sm_active_avg=used / allocated)
    client.force_login(user)
    return {"client": client, "jobs": jobs, "theirs": theirs, "h100": h100}


def cells(response, table_id: str = "explore-table", row_attribute: str = "data-key") -> list[list[str]]:
    """The text of each cell of the table's rows that carry `row_attribute`."""
    body = response.content.decode()
    table = body[body.index(f'id="{table_id}"'):].split("</table>")[0]
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(rf"<tr {row_attribute}[^>]*>(.*?)</tr>", table, re.S)]


def test_the_last_7_days_by_flavor_then_by_job_then_the_jobs_hours(world):
    client = world["client"]
    team = client.get(URL)
    assert team.status_code == 200
    # The default range is the last 7 days: the hour 10 days ago is out; another team's hours never count.
    assert cells(team) == [["h100", "16.00", "12.00", "75 %"], ["h100-1g", "2.00", "1.00", "50 %"]]
    assert 'id="explore-chart"' in team.content.decode()
    today = timezone.now().date()
    start = (today - timedelta(days=6)).isoformat()
    assert f'href="?start={start}&amp;end={today.isoformat()}&amp;flavor=h100"' in team.content.decode()

    flavor = client.get(URL, {"start": start, "end": today.isoformat(), "flavor": "h100"})
    assert cells(flavor) == [["bert", "8.00", "6.00", "75 %"], ["gpt", "4.00", "4.00", "100 %"],
                             ["outside portal jobs", "4.00", "2.00", "50 %"]]
    body = flavor.content.decode()
    assert f'&amp;job={world["jobs"]["bert"].pk}"' in body and "theirs" not in body

    job = client.get(URL, {"start": start, "end": today.isoformat(), "flavor": "h100", "job": world["jobs"]["bert"].pk})
    body = job.content.decode()
    assert job.status_code == 200 and 'data-chart-for="explore-chart"' in body
    assert "All flavors</a> ›" in body and ">h100</a> › bert" in body  # the path back up, each a link

    wider = client.get(URL, {"start": (today - timedelta(days=30)).isoformat(), "end": today.isoformat()})
    assert cells(wider)[0] == ["h100", "24.00", "18.00", "75 %"]  # the hour 10 days ago is in now


@pytest.mark.parametrize("query, field, message", [
    ({"start": "2026-05-10", "end": "2026-05-01"}, "start", "must start on or before its last day"),
    ({"start": "2026-01-01", "end": "2026-05-01"}, "start", "At most 92 days"),
    ({"end": "2999-01-01"}, "end", "cannot end after today"),
    ({"start": "yesterday"}, "start", "Enter a valid date"),
])
def test_a_bad_range_is_refused_beside_its_field(world, query, field, message):
    response = world["client"].get(URL, query)
    assert response.status_code == 400
    body = response.content.decode()
    assert f'id="id_{field}-error"' in body and message in body


def test_another_teams_flavor_or_job_is_not_found(world):
    client = world["client"]
    assert client.get(URL, {"flavor": "a100"}).status_code == 404
    assert client.get(URL, {"flavor": "h100", "job": world["theirs"].pk}).status_code == 404
    assert client.get(URL, {"flavor": "h100-1g", "job": world["jobs"]["bert"].pk}).status_code == 404
    assert client.get("/teams/vision/usage/explore/").status_code == 404


def test_each_level_costs_the_same_queries_whatever_the_data(world):
    client = world["client"]
    job = world["jobs"]["bert"]

    def counts():
        found = []
        for query in ({}, {"flavor": "h100"}, {"flavor": "h100", "job": job.pk}):
            with CaptureQueriesContext(connection) as captured:
                assert client.get(URL, query).status_code == 200
            found.append(len(captured))
        return found

    before = counts()
    start = datetime.combine(timezone.now().date(), datetime.min.time(), tzinfo=UTC)
    for n in range(30):
        extra = Job.objects.create(team=job.team, cluster=job.cluster, flavor=job.flavor,
                                   priority_tier=job.priority_tier, kind="batch", name=f"more-{n}",
                                   image="ghcr.io/acme/t:1", submitted_by=job.submitted_by)
        for h in range(3):
            JobUsageHour.objects.create(job=extra, flavor=job.flavor, hour=start + timedelta(hours=h),
                                        allocated_gpu_hours=1, used_gpu_hours=1)
    for h in range(3):  # and more hours of the job drilled into
        JobUsageHour.objects.create(job=job, flavor=job.flavor, hour=start + timedelta(hours=h),
                                    allocated_gpu_hours=1, used_gpu_hours=1)
    assert counts() == before
