"""`make run` on a kept demo: seed_demo starts on whatever `var/` holds and with REDIS_URL set. Demo jobs that moved
on since the last run are left as they are (not waited for), a job late to its state is reported without failing
the demo, and the demo's tasks run in the seeding process even when a broker is configured."""

from io import StringIO

import pytest
from django.core.management import call_command

from composition.management.commands import seed_jobs
from config import celery_app
from jobs.choices import JobState
from tests.api.world import build_world
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def test_a_kept_demo_job_that_ended_otherwise_is_not_waited_for():
    world = build_world()
    job = world.job
    type(job).objects.filter(pk=job.pk).update(name="nightly-benchmark", state=JobState.FAILED)
    cluster = job.cluster
    command = seed_jobs.Command(stdout=StringIO(), stderr=StringIO())
    # No row of this run's JOBS: only the FINAL states of kept jobs could be waited for, and none should be.
    assert list(command._cluster_jobs(cluster, [], timeout=0)) == []


def test_a_job_late_to_its_state_is_reported_and_the_demo_goes_on(monkeypatch):
    from django.core.management.base import CommandError

    def late(self, cluster, rows, *, timeout):
        yield True
        raise CommandError("gpu-east ml-research/nightly-benchmark-11: still failed after 60 s, expected preempted")

    monkeypatch.setattr(seed_jobs.Command, "_cluster_jobs", late)
    monkeypatch.setattr(seed_jobs, "_call", lambda *a, **k: {})
    ClusterFactory(name="gpu-east", connection="sandbox")
    err = StringIO()
    call_command("seed_jobs", stdout=StringIO(), stderr=err)
    assert "still failed after 60 s" in err.getvalue()


def test_seed_demo_runs_the_tasks_in_process_even_with_a_broker(monkeypatch):
    from composition.management.commands import seed_demo

    seen = []
    monkeypatch.setattr(seed_demo.Command, "_seed_all", lambda self, *a: seen.append(
        celery_app.conf.task_always_eager))
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False  # as with REDIS_URL set
    try:
        call_command("seed_demo", kueue_url="http://127.0.0.1:9", volcano_url="http://127.0.0.1:9", wait=0)
        assert celery_app.conf.task_always_eager is False  # put back as it was
    finally:
        celery_app.conf.task_always_eager = before
    assert seen == [True]
