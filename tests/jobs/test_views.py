"""The job pages: the list's query count does not grow with the number of jobs, and the detail page's live part
is served alone to the page's own polling, which stops once the job has ended."""

import pytest
from django.test import Client

from jobs.choices import JobState
from jobs.models import Job
from tenants.choices import Role
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PriorityTierFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    cluster = ClusterFactory()
    flavor = GpuFlavorFactory(cluster=cluster, name="h100")
    team = TeamFactory(slug="nlp")
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    tier = PriorityTierFactory(name="standard", value=1000)
    client = Client()
    client.force_login(member)
    return {"cluster": cluster, "flavor": flavor, "team": team, "member": member, "tier": tier, "client": client}


def add_jobs(world, count, state=JobState.RUNNING):
    return Job.objects.bulk_create(
        Job(team=world["team"], cluster=world["cluster"], flavor=world["flavor"], priority_tier=world["tier"],
            kind="pytorch", name=f"run-{i}", image="ghcr.io/acme/train:1", submitted_by=world["member"],
            state=state) for i in range(count))


def list_queries(world) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert world["client"].get("/jobs/").status_code == 200
    return len(queries)


def test_the_job_list_costs_the_same_for_3_and_60_jobs(world, django_assert_max_num_queries):
    add_jobs(world, 3)
    few = list_queries(world)
    add_jobs(world, 57)
    with django_assert_max_num_queries(few):
        assert world["client"].get("/jobs/").status_code == 200


@pytest.mark.parametrize(("state", "polls"), [(JobState.QUEUED, True), (JobState.RUNNING, True),
                                              (JobState.PREEMPTED, True), (JobState.SUCCEEDED, False)])
def test_the_detail_page_polls_its_live_part_while_the_job_is_active(world, state, polls):
    job = add_jobs(world, 1, state)[0]
    page = world["client"].get(f"/jobs/{job.pk}/").content.decode()
    assert ('hx-trigger="every 2s"' in page) is polls
    assert "<h2>YAML</h2>" in page
    part = world["client"].get(f"/jobs/{job.pk}/", headers={"HX-Request": "true", "HX-Target": "job-status"})
    text = part.content.decode()
    assert 'id="job-status"' in text
    assert "<h2>YAML</h2>" not in text and "<html" not in text
    assert f">{JobState(state).label}<" in text


def test_another_teams_job_is_not_found_even_by_the_poll(world):
    job = add_jobs(world, 1)[0]
    outsider = MembershipFactory(team=TeamFactory(slug="vision"), role=Role.ADMIN).user
    client = Client()
    client.force_login(outsider)
    response = client.get(f"/jobs/{job.pk}/", headers={"HX-Request": "true", "HX-Target": "job-status"})
    assert response.status_code == 404


@pytest.mark.parametrize(("state", "polls"), [(JobState.RUNNING, True), (JobState.FAILED, False)])
def test_the_pods_part_polls_the_cluster_only_while_the_job_is_active(world, state, polls):
    job = add_jobs(world, 1, state)[0]
    text = world["client"].get(f"/jobs/{job.pk}/pods/").content.decode()
    assert "The cluster could not be read" in text  # the factory's cluster answers nowhere: shown, not hidden
    assert ('hx-trigger="every 10s"' in text) is polls


def test_the_filters_are_labelled_offer_known_names_and_ignore_case(world):
    add_jobs(world, 2)
    other = GpuFlavorFactory(cluster=world["cluster"], name="l40s")
    Job.objects.filter(name="run-1").update(flavor=other)
    page = world["client"].get("/jobs/").content.decode()
    for label in ("State", "Kind", "Submitted by", "Flavor"):
        assert f">{label}</label>" in page
    assert '<option value="h100"></option>' in page and '<option value="l40s"></option>' in page
    assert f'<option value="{world["member"].username}"></option>' in page
    only = world["client"].get("/jobs/", {"flavor": " L40S ", "user": world["member"].username.upper()})
    text = only.content.decode()
    assert ">run-1<" in text and ">run-0<" not in text
    assert 'value="l40s"' in text  # the known name it matched


def test_the_job_pages_read_only_the_database_and_the_list_polls_while_a_job_is_active(world, monkeypatch):
    from portal import kube

    def no_cluster(*args, **kwargs):
        raise AssertionError("a page load called the cluster")

    monkeypatch.setattr(kube, "client_for_cluster", no_cluster)
    running = add_jobs(world, 1)[0]
    page = world["client"].get(f"/jobs/{running.pk}/").content.decode()
    assert 'hx-target="#pods-slot"' in page and 'hx-trigger="load"' not in page  # pods only when asked
    listing = world["client"].get("/jobs/").content.decode()
    assert 'hx-select="#job-rows"' in listing and 'hx-trigger="every 5s"' in listing
    Job.objects.filter(pk=running.pk).update(state=JobState.SUCCEEDED)
    assert 'hx-trigger="every 5s"' not in world["client"].get("/jobs/").content.decode()
