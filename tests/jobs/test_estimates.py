"""Estimates end to end on a sandbox that runs the jobs: the rows, the API and the pages say when a waiting job will
start (and a running one end), the estimate holds against what the scheduler then does, it follows the history of
comparable runs once there is some, and the alternatives that would start a job sooner are one call away."""

from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from jobs import estimates, sooner
from jobs.choices import JobState
from jobs.models import Job
from tenants.choices import TeamState
from tests.jobs.conftest import T0, build_world, step
from tests.jobs.test_simulated import submit, sync

pytestmark = pytest.mark.django_db


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def refresh(world, seconds: float) -> dict[int, Job]:
    estimates.job_estimates_refresh(cluster=world["cluster"], now=at(seconds))
    return {job.pk: job for job in Job.objects.all()}


def likely(job: Job) -> datetime:
    return datetime.fromisoformat(job.estimate["likely"].replace("Z", "+00:00"))


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_a_job_behind_one_with_a_runtime_limit_starts_when_the_estimate_said(simulating_sandbox, run_on_commit,
                                                                            backend):
    world = build_world(simulating_sandbox.url, backend, guaranteed=8, burst=0)
    first = submit(world, run_on_commit, name="long", workers=1, gpus_per_worker=8, max_runtime_minutes=10)
    second = submit(world, run_on_commit, name="next", workers=1, gpus_per_worker=8)
    step(simulating_sandbox, 0)
    simulating_sandbox.simulator.plan("nlp", first.object_name, duration=10**6)  # runs until its limit stops it
    step(simulating_sandbox, 5)
    sync(world)
    rows = refresh(world, 30)
    waiting, running = rows[second.pk], rows[first.pk]
    assert running.estimate["kind"] == "end" and likely(running) == at(600)
    assert waiting.estimate["kind"] == "start"
    assert waiting.estimate["sentence"].startswith("Likely to start around ")
    assert "8 h100 free up when long ends (its runtime limit is " in waiting.estimate["sentence"]
    assert waiting.estimate["basis"]["waits_for"]["job"] == first.pk
    for clock in (300, 599, 600, 601):
        step(simulating_sandbox, clock)
    started = sync(world)[second.pk]
    assert started.state in (JobState.ADMITTED, JobState.RUNNING)
    assert abs((likely(waiting) - started.admitted_at).total_seconds()) <= 60


def test_after_a_few_runs_of_the_image_the_estimate_follows_their_history_not_the_limit(simulating_sandbox,
                                                                                         run_on_commit):
    world = build_world(simulating_sandbox.url, "kueue", guaranteed=8, burst=0)
    clock = 0
    for i in range(3):  # three runs of 100 s (the sandbox's run time) under a limit of an hour
        submit(world, run_on_commit, name=f"run-{i}", workers=1, gpus_per_worker=8, max_runtime_minutes=60)
        for offset in (1, 10, 110):
            step(simulating_sandbox, clock + offset)
            sync(world)
        clock += 110
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.SUCCEEDED}
    now_running = submit(world, run_on_commit, name="run-3", workers=1, gpus_per_worker=8, max_runtime_minutes=60)
    behind = submit(world, run_on_commit, name="run-4", workers=1, gpus_per_worker=8, max_runtime_minutes=60)
    step(simulating_sandbox, clock + 1)
    step(simulating_sandbox, clock + 10)
    sync(world)
    rows = refresh(world, clock + 20)
    assert rows[now_running.pk].estimate["basis"]["run"]["evidence"] == "history"
    assert "3 earlier runs of this image at this size took" in rows[behind.pk].estimate["sentence"]
    predicted = likely(rows[behind.pk])
    assert predicted < at(clock + 1 + 600)  # nowhere near the hour the limit allows
    for t in range(clock + 20, clock + 140, 10):
        step(simulating_sandbox, t)
    started = sync(world)[behind.pk]
    assert started.admitted_at and abs((predicted - started.admitted_at).total_seconds()) <= 60


def test_the_api_and_pages_show_the_estimate_and_a_job_that_cannot_start_says_so(simulating_sandbox,
                                                                                 run_on_commit, client):
    world = build_world(simulating_sandbox.url, "kueue", guaranteed=8, burst=0)
    first = submit(world, run_on_commit, name="first", workers=1, gpus_per_worker=8, max_runtime_minutes=30)
    second = submit(world, run_on_commit, name="second", workers=1, gpus_per_worker=8)
    step(simulating_sandbox, 0)
    sync(world)
    refresh(world, 10)
    api = APIClient()
    api.force_authenticate(world["member"])
    detail = api.get(f"/api/v1/jobs/{second.pk}/").json()
    assert detail["expected_end"] is None and detail["estimated_start"]["cannot_start"] is False
    assert detail["estimated_start"]["likely"].endswith("Z") and detail["estimated_start"]["basis"]["ahead"] == 0
    listed = {row["id"]: row for row in api.get("/api/v1/jobs/").json()["results"]}
    assert listed[first.pk]["expected_end"]["likely"] == estimates.iso(T0 + 1800)
    assert listed[second.pk]["estimated_start"] == detail["estimated_start"]
    client.force_login(world["member"])
    page = client.get(f"/jobs/{second.pk}/").content.decode()
    assert 'id="job-estimate"' in page and "Likely to start around" in page
    assert "starts ~" in client.get("/jobs/").content.decode()
    world["team"].state = TeamState.SUSPENDED  # its queue is held: nothing new starts
    world["team"].save()
    rows = refresh(world, 20)
    assert rows[second.pk].estimate["kind"] == "never"
    assert api.get(f"/api/v1/jobs/{second.pk}/").json()["estimated_start"]["cannot_start"] is True


def test_what_would_start_it_sooner_and_one_call_to_resubmit_with_it(simulating_sandbox, run_on_commit):
    world = build_world(simulating_sandbox.url, "kueue", guaranteed=8, burst=0)
    submit(world, run_on_commit, name="busy", workers=1, gpus_per_worker=6, max_runtime_minutes=60)
    waiting = submit(world, run_on_commit, name="wide", workers=2, gpus_per_worker=2)
    step(simulating_sandbox, 0)
    sync(world)
    refresh(world, 10)
    api = APIClient()
    api.force_authenticate(world["member"])
    answer = api.get(f"/api/v1/jobs/{waiting.pk}/sooner/").json()
    by_label = {alt["label"]: alt for alt in answer["alternatives"]}
    fewer = by_label["1 worker instead of 2"]
    assert fewer["sooner"] and fewer["change"] == {"workers": 1}
    assert fewer["estimated_start"]["sentence"] == "Likely to start within a minute: there is room for it now."
    assert "at priority urgent" in by_label
    moved = api.post(f"/api/v1/jobs/{waiting.pk}/sooner/", {"change": fewer["change"]}, format="json")
    assert moved.status_code == 201 and moved.json()["workers"] == 1
    assert Job.objects.get(pk=waiting.pk).cancel_requested_at is not None
    refused = api.post(f"/api/v1/jobs/{moved.json()['id']}/sooner/", {"change": {"workers": 7}}, format="json")
    assert refused.status_code == 400


def test_a_submission_may_ask_for_the_teams_earliest_cluster(simulating_sandbox, run_on_commit):
    from quotas import services as quota_services
    from tests.factories import ClusterFactory, GpuFlavorFactory, PlatformAdminFactory, TeamNamespaceFactory

    world = build_world(simulating_sandbox.url, "kueue", guaranteed=8, burst=0)
    submit(world, run_on_commit, name="busy", workers=1, gpus_per_worker=8, max_runtime_minutes=60)
    other = ClusterFactory(name="west", server=simulating_sandbox.url, scheduler="kueue")
    flavor = GpuFlavorFactory(cluster=other, name="h100", gpus_per_node=8, capacity=64)
    TeamNamespaceFactory(team=world["team"], cluster=other)
    quota_services.quota_set(actor=PlatformAdminFactory(), team=world["team"], flavor=flavor, guaranteed=8, burst=0,
                             cpu_cores=64, memory_gib=512)
    chosen = sooner.earliest_flavor(team=world["team"], flavor=world["flavor"], kind="pytorch",
                                    image="ghcr.io/acme/train:1.2", workers=1, gpus_per_worker=8, tier=None,
                                    max_runtime_minutes=60)
    assert chosen == flavor
    api = APIClient()
    api.force_authenticate(world["member"])
    placed = api.post("/api/v1/jobs/", {"team": "nlp", "kind": "batch", "name": "anywhere", "flavor": "h100",
                                        "cluster": world["cluster"].name, "image": "ghcr.io/acme/train:1.2",
                                        "command": ["python", "run.py"], "gpus_per_worker": 8,
                                        "earliest_cluster": True}, format="json")
    assert placed.status_code == 201 and placed.json()["cluster"] == "west"


def test_an_estimate_that_time_overtook_is_made_again(simulating_sandbox, run_on_commit):
    world = build_world(simulating_sandbox.url, "kueue", guaranteed=8, burst=0)
    first = submit(world, run_on_commit, name="first", workers=1, gpus_per_worker=8, max_runtime_minutes=30)
    second = submit(world, run_on_commit, name="second", workers=1, gpus_per_worker=8)
    step(simulating_sandbox, 0)
    sync(world)
    refresh(world, 10)
    assert estimates.job_estimates_refresh_stale(now=at(600)) == []  # nothing overdue yet
    assert estimates.job_estimates_refresh_stale(now=at(1800 + 120)) == [world["cluster"].pk]
    assert likely(Job.objects.get(pk=first.pk)) == at(1800 + 120)  # outran its limit's end: ends now at the latest
    assert likely(Job.objects.get(pk=second.pk)) >= at(1800 + 120)


def test_the_forecast_world_carries_the_teams_fair_share_weights():
    from quotas import services as quota_services
    from tests.factories import (
        ClusterFactory,
        GpuFlavorFactory,
        PlatformAdminFactory,
        TeamFactory,
        TeamNamespaceFactory,
    )

    cluster = ClusterFactory(scheduler="kueue", cohort="gpu")
    flavor = GpuFlavorFactory(cluster=cluster, name="h100", gpus_per_node=8, capacity=16)
    for slug, weight in (("nlp", 1), ("vision", 3)):
        team = TeamFactory(slug=slug, fair_share_weight=weight)
        TeamNamespaceFactory(team=team, cluster=cluster)
        quota_services.quota_set(actor=PlatformAdminFactory(), team=team, flavor=flavor, guaranteed=8, burst=8,
                                 cpu_cores=64, memory_gib=512)
    world = estimates.cluster_world(cluster)
    assert (world.queues["nlp"].weight, world.queues["vision"].weight, world.fair) == (1, 3, True)


def test_a_waiting_job_allows_for_the_higher_priority_work_its_cluster_has_been_getting():
    from datetime import timedelta

    from quotas import services as quota_services
    from tenants.models import Cluster
    from tests.factories import (
        ClusterFactory,
        GpuFlavorFactory,
        PlatformAdminFactory,
        PriorityTierFactory,
        TeamFactory,
        TeamNamespaceFactory,
        UserFactory,
    )

    now = at(0)
    cluster = ClusterFactory(scheduler="kueue", cohort="gpu")
    Cluster.objects.filter(pk=cluster.pk).update(created_at=now - timedelta(days=1))
    cluster.refresh_from_db()
    flavor = GpuFlavorFactory(cluster=cluster, name="h100", gpus_per_node=8, capacity=8)
    team = TeamFactory(slug="nlp")
    TeamNamespaceFactory(team=team, cluster=cluster)
    quota_services.quota_set(actor=PlatformAdminFactory(), team=team, flavor=flavor, guaranteed=8, burst=0,
                             cpu_cores=64, memory_gib=512)
    high = PriorityTierFactory(name="urgent", value=100, preemption_policy="Never")
    low = PriorityTierFactory(name="standard", value=0)
    user = UserFactory()

    def job(name, tier, submitted, state, *, started=None, finished=None, image="ghcr.io/acme/eval:1"):
        return Job.objects.create(team=team, cluster=cluster, flavor=flavor, kind="batch", priority_tier=tier,
                                  name=name, image=image, command=["python", "train.py"],
                                  workers=1, gpus_per_worker=8, max_runtime_minutes=90, submitted_by=user,
                                  submitted_at=submitted, state=state, admitted_at=started, started_at=started,
                                  finished_at=finished)

    for hour in range(1, 25):  # an urgent job of half an hour every hour of the last day
        submitted = now - timedelta(hours=hour)
        job(f"urgent-{hour}", high, submitted, JobState.SUCCEEDED, started=submitted,
            finished=submitted + timedelta(minutes=30), image="ghcr.io/acme/serve:1")
    job("cancelled", high, now - timedelta(minutes=5), JobState.CANCELLED)  # never ran: took no quota
    running = job("long", low, now - timedelta(hours=1), JobState.RUNNING, started=now - timedelta(minutes=10))
    waiting = job("next", low, now - timedelta(minutes=1), JobState.QUEUED)

    world, _, works = estimates.cluster_inputs(cluster, now)
    past, since = estimates.recent_submissions(cluster, now, works)
    assert since == cluster.created_at.timestamp()
    assert len(past) == 26 and {s.priority for s in past} == {0, 100}  # not the cancelled one
    by_time = {s.at: s for s in past}
    assert by_time[waiting.submitted_at.timestamp()].seconds == 90 * 60  # waiting: as its estimate expects
    assert by_time[(now - timedelta(hours=3)).timestamp()].seconds == 30 * 60  # ended: as it ran

    _, documents = estimates.cluster_documents(cluster, now)
    document = documents[waiting.pk]
    assert documents[running.pk]["likely"] == estimates.iso((now + timedelta(minutes=80)).timestamp())
    assert document["basis"]["later"]["count"] >= 1
    assert document["basis"]["later"]["count"] == document["basis"]["later"]["higher_priority"]
    count = document["basis"]["later"]["count"]
    assert (f"allowing for about {count} higher-priority job{'s' if count > 1 else ''} expected to be submitted "
            "meanwhile and start first, as in the last 24 hours.") in document["sentence"]
    assert likely(Job(estimate=document)) >= now + timedelta(minutes=80 + 30)  # after the running one and one more
