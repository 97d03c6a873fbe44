"""The usage explorer's last level, job → GPU: each GPU the job's pods held, read live from a real Prometheus (the
series of tests/billing/conftest.py); tenant-scoped, shareable, a failing Prometheus said on the page, and queries
(to the database and to Prometheus) that do not grow with the number of GPUs."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.models import ClusterUsageSource
from jobs.models import Job
from tenants.choices import Role
from tests import prometheus
from tests.billing.conftest import H100, JOB_INFER, JOB_TRAIN
from tests.billing.test_collection import make_world
from tests.billing.test_usage_explore import cells
from tests.factories import MembershipFactory, TeamFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(prometheus_data, client):
    url, scenario = prometheus_data
    world = make_world(url)
    start = scenario.hour(0, 0)
    # The jobs are the pods of the series: train-0 (alpha, four H100s) and infer-0 (beta, three MIG slices).
    for pk, name in ((JOB_TRAIN, "train"), (JOB_INFER, "infer")):
        Job.objects.filter(pk=pk).update(kept_object_name=name, started_at=start,
                                         finished_at=start + timedelta(hours=1),
                                         submitted_at=start - timedelta(minutes=5))
    user = UserFactory()
    for team in world["teams"].values():
        MembershipFactory(team=team, user=user, role=Role.VIEWER)  # viewers explore as members do
    client.force_login(user)
    return {**world, "client": client, "user": user, "scenario": scenario, "url": url}


def gpu_url(slug="alpha", flavor="h100", job=JOB_TRAIN, **more) -> tuple[str, dict]:
    return f"/teams/{slug}/usage/explore/", {"flavor": flavor, "job": job, "by": "gpu", **more}


def rows(response) -> list[list[str]]:
    return cells(response, "gpu-table", "data-uuid")


def test_the_job_level_leads_to_each_gpu_with_its_mean_and_max(world):
    client = world["client"]
    path, query = gpu_url()
    job_level = client.get(path, {k: v for k, v in query.items() if k != "by"})
    assert job_level.status_code == 200
    assert 'id="per-gpu-link" href="?start=' in job_level.content.decode()
    assert f'job={JOB_TRAIN}&amp;by=gpu"' in job_level.content.decode()

    page = client.get(path, query)
    assert page.status_code == 200
    body = page.content.decode()
    found = rows(page)
    assert [r[0] for r in found] == [f"node-h100 GPU {i}" for i in range(4)]
    assert {r[6] for r in found} == {"train-0"} and {r[7] for r in found} == {H100}
    assert [r[8] for r in found] == [f"GPU-node-h100-{i}" for i in range(4)]
    for row in found:
        mean, peak = int(row[1].rstrip(" %")), int(row[3].rstrip(" %"))
        assert 0 < mean <= peak <= 100
        assert row[2].endswith("GiB") and row[4].endswith("GiB")
        assert row[5].startswith("busy (graphics engine activity")  # not flagged
    assert 'data-chart-for="explore-chart"' in body
    assert "activity (graphics engine activity (time-based)) and framebuffer memory" in body
    assert "each point the mean of 1 minute" in body
    # The path back up, each level a link; the range picker and its presets keep the level.
    assert ">h100</a> ›" in body and re.search(rf'<a href="\?[^"]*job={JOB_TRAIN}">job-{JOB_TRAIN}</a> › GPUs', body)
    assert '<input type="hidden" name="by" value="gpu"' in body
    presets = re.findall(r'href="\?([^"]+)">Last', body)
    assert len(presets) == 4 and all(p.endswith(f"job={JOB_TRAIN}&amp;by=gpu") for p in presets)


def test_gpus_that_did_no_work_are_flagged_as_the_idle_rule_judges(world, settings):
    settings.IDLE_GPU_THRESHOLD = 0.99  # every GPU of the series works less than that
    found = rows(world["client"].get(*gpu_url()))
    assert len(found) == 4
    for row in found:
        assert row[0].endswith(" idle")
        assert row[5].startswith("Idle: ") and "does no work (graphics engine activity (time-based) " in row[5]
        if float(row[2].split()[0]) >= 2:  # memory held is said, and is not work
            assert f"holds {row[2].split()[0]} GiB of memory per GPU" in row[5]


def test_mig_slices_are_rows_of_their_own(world):
    found = rows(world["client"].get(*gpu_url(slug="beta", flavor="mig-1g", job=JOB_INFER)))
    assert [r[0] for r in found] == [f"node-a100 GPU 0 1g.10gb #{i}" for i in range(3)]


def test_another_teams_job_is_not_found_at_the_gpu_level(world):
    client = world["client"]
    stranger = TeamFactory(slug="gamma")
    assert client.get(*gpu_url(slug="alpha", flavor="mig-1g", job=JOB_INFER)).status_code == 404  # beta's job
    assert client.get(*gpu_url(slug="beta", flavor="h100", job=JOB_TRAIN)).status_code == 404
    assert client.get(*gpu_url(slug=stranger.slug)).status_code == 404  # not a member
    assert client.get(*gpu_url(by="nonsense")).status_code == 400


def test_a_prometheus_that_fails_is_said_on_the_page_and_the_rest_still_works(world, settings):
    settings.BILLING_PAGE_TIMEOUT = 0.3
    client = world["client"]
    source = ClusterUsageSource.objects.get(cluster=world["cluster"])
    source.prometheus_url = prometheus.closed_port_url()
    source.save()
    page = client.get(*gpu_url())
    body = page.content.decode()
    assert page.status_code == 200
    assert 'id="gpu-error"' in body and "could not be read" in body and "is unreachable" in body
    assert 'id="range-form"' in body and 'id="explore-path"' in body  # the picker and the path still work
    with prometheus.silent_server() as url:
        source.prometheus_url = url
        source.save()
        body = client.get(*gpu_url()).content.decode()
    assert "did not answer within 0.3 s" in body
    # Its stored hours are a click away and need no Prometheus.
    path, query = gpu_url()
    del query["by"]
    assert client.get(path, query).status_code == 200


def test_a_range_the_job_did_not_run_in_says_so_without_asking_prometheus(world):
    client = world["client"]
    first = world["scenario"].hour(0, 0).date()
    before = first - timedelta(days=3)
    path, query = gpu_url(start=(before - timedelta(days=1)).isoformat(), end=before.isoformat())
    source = ClusterUsageSource.objects.get(cluster=world["cluster"])
    source.prometheus_url = prometheus.closed_port_url()  # would fail if asked
    source.save()
    body = client.get(path, query).content.decode()
    assert 'id="gpu-empty"' in body and "No pod of this job ran in this range" in body
    assert "gpu-error" not in body


def test_a_job_whose_pods_held_no_gpu_says_so(world):
    Job.objects.filter(pk=JOB_TRAIN).update(kept_object_name="no-such-pods")
    body = world["client"].get(*gpu_url()).content.decode()
    assert "No pod of this job held a GPU in this range" in body


def test_the_page_costs_the_same_queries_for_three_gpus_as_for_four(world):
    client = world["client"]
    counts = []
    for query in (gpu_url(), gpu_url(slug="beta", flavor="mig-1g", job=JOB_INFER)):
        with CaptureQueriesContext(connection) as captured:
            assert len(rows(client.get(*query))) in (3, 4)
        counts.append(len(captured))
    assert counts[0] == counts[1]


def test_the_job_page_links_to_its_gpus(world):
    page = world["client"].get(f"/usage/jobs/{JOB_TRAIN}/activity/")
    body = page.content.decode()
    job = Job.objects.get(pk=JOB_TRAIN)
    first, last = job.started_at.date().isoformat(), job.finished_at.date().isoformat()
    link = re.search(r'id="each-gpu-link" href="([^"]+)"', body).group(1).replace("&amp;", "&")
    assert link == f"/teams/alpha/usage/explore/?start={first}&end={last}&flavor=h100&job={JOB_TRAIN}&by=gpu"
    assert len(rows(world["client"].get(link))) == 4
