"""A running job's progress, end to end on a sandbox that runs the jobs: the report queues a refresh of the cluster's
estimates, the running job's expected end follows its progress rather than its runtime limit, the job waiting for
its GPUs says so and starts when the estimate said, and the page and the API show the progress."""

from datetime import UTC, datetime

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from jobs import estimates, services
from jobs.choices import JobState
from jobs.models import Job
from tests.jobs.conftest import T0, build_world, step
from tests.jobs.test_simulated import submit, sync

pytestmark = pytest.mark.django_db


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def likely(job: Job) -> datetime:
    return datetime.fromisoformat(job.estimate["likely"].replace("Z", "+00:00"))


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_a_job_waiting_behind_one_that_reports_progress_starts_when_its_progress_said(
        simulating_sandbox, run_on_commit, client, backend):
    world = build_world(simulating_sandbox.url, backend, guaranteed=8, burst=0)
    first = submit(world, run_on_commit, name="train-42", workers=1, gpus_per_worker=8, max_runtime_minutes=120)
    second = submit(world, run_on_commit, name="next", workers=1, gpus_per_worker=8)
    step(simulating_sandbox, 0)
    simulating_sandbox.simulator.plan("nlp", first.object_name, duration=900)  # 15 min, under a 2 h limit
    step(simulating_sandbox, 5)
    running = sync(world)[first.pk]
    since = running.admitted_at or running.started_at
    estimates.job_estimates_refresh(cluster=world["cluster"], now=at(10))
    assert Job.objects.get(pk=second.pk).estimate["basis"]["waits_for"]["evidence"] == "limit"

    cache.delete(f"jobs:estimates-refresh:{world['cluster'].pk}")
    with run_on_commit():  # the training loop reports, as Portal.report_progress does through the API
        services.job_progress_report(actor=world["member"], job=running, done=100, total=900, now=at(105))
    assert cache.get(f"jobs:estimates-refresh:{world['cluster'].pk}")  # a refresh of the cluster is queued
    services.job_progress_report(actor=world["member"], job=running, done=300, total=900, now=at(305))
    estimates.job_estimates_refresh(cluster=world["cluster"], now=at(310))
    rows = {job.pk: job for job in Job.objects.all()}
    ends = since.timestamp() + 3 * (T0 + 305 - since.timestamp())  # a third done: three times its time so far
    assert rows[first.pk].estimate["basis"]["run"]["evidence"] == "progress"
    assert abs(likely(rows[first.pk]).timestamp() - ends) < 1
    assert rows[first.pk].estimate["sentence"].startswith("train-42 is 33 % done after 5 min, so it ends around ")
    sentence = rows[second.pk].estimate["sentence"]
    assert "8 h100 free up when train-42 ends (train-42 is 33 % done after 5 min, so it ends around " in sentence
    predicted = likely(rows[second.pk])

    api = APIClient()
    api.force_authenticate(world["member"])
    shown = api.get(f"/api/v1/jobs/{first.pk}/").json()
    assert shown["progress"]["done"] == 300 and shown["progress"]["percentage"] == 33.3
    assert shown["expected_end"]["basis"]["run"]["evidence"] == "progress"
    client.force_login(world["member"])
    page = client.get(f"/jobs/{first.pk}/").content.decode()
    assert 'id="job-progress"' in page and "33 % (300 of 900)" in page

    for clock in range(310, 1000, 30):
        step(simulating_sandbox, clock)
    started = sync(world)[second.pk]
    assert started.state in (JobState.ADMITTED, JobState.RUNNING, JobState.SUCCEEDED)
    assert abs((predicted - started.admitted_at).total_seconds()) <= 60  # not the two hours the limit allows


def test_a_stale_report_gives_way_to_the_runtime_limit(simulating_sandbox, run_on_commit):
    world = build_world(simulating_sandbox.url, "kueue", guaranteed=8, burst=0)
    first = submit(world, run_on_commit, name="train-42", workers=1, gpus_per_worker=8, max_runtime_minutes=120)
    step(simulating_sandbox, 0)
    simulating_sandbox.simulator.plan("nlp", first.object_name, duration=10**6)
    step(simulating_sandbox, 5)
    running = sync(world)[first.pk]
    services.job_progress_report(actor=world["member"], job=running, done=500, total=1000, now=at(600))
    estimates.job_estimates_refresh(cluster=world["cluster"], now=at(700))
    assert Job.objects.get(pk=first.pk).estimate["basis"]["run"]["evidence"] == "progress"
    estimates.job_estimates_refresh(cluster=world["cluster"], now=at(600 + 31 * 60))  # no report for 31 min
    assert Job.objects.get(pk=first.pk).estimate["basis"]["run"]["evidence"] == "limit"
