"""The cluster watcher and the polling status sync against the real API server: a Volcano job's status, written
by the test as Volcano's job controller would write it (none runs here), reaches the job's row; through the
watcher's informers (list, then watch from the list's resourceVersion) within seconds, and through the sync."""

import threading
import time
from datetime import UTC, datetime

import pytest
from django.conf import settings

from jobs import services as job_services
from jobs import sync as job_sync
from jobs import watch
from jobs.choices import JobState
from jobs.models import Job
from tenants.choices import Scheduler
from tests.controlplane.test_least_privilege import _world
from tests.requires import unavailable

pytestmark = [pytest.mark.controlplane, pytest.mark.django_db(transaction=True)]


def _set_phase(plane, job: Job, phase: str) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status, body = plane.request(
        "PATCH", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{job.team.namespace}/jobs/{job.object_name}/status",
        {"status": {"state": {"phase": phase, "lastTransitionTime": now}}},
        content_type="application/merge-patch+json")
    assert status == 200, body


def _state(job: Job) -> str:
    return Job.objects.values_list("state", flat=True).get(pk=job.pk)


def test_the_watcher_and_the_sync_bring_a_volcano_jobs_status(control_plane, real_cluster, run_on_commit):
    if not settings.REDIS_URL:
        unavailable("REDIS_URL is not set: the watcher's lease lives in Redis", flag="REQUIRE_SERVICES")
    cluster = real_cluster(scheduler=Scheduler.VOLCANO, cohort="")
    world = _world(cluster, "watched")
    jobs = []
    for name in ("watched-1", "synced-1"):
        with run_on_commit():
            jobs.append(job_services.job_submit(
                actor=world["member"], team=world["team"], flavor=world["flavor"], kind="batch", name=name,
                image="ghcr.io/acme/train:1", command=["python", "main.py"], workers=1, gpus_per_worker=1,
                cpu_per_worker=2, memory_gib_per_worker=8))
    watched, synced = jobs

    stop = threading.Event()
    watcher = watch.ClusterWatcher(cluster, stop)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        time.sleep(1)  # its informers listed and are watching
        _set_phase(control_plane, watched, "Running")
        deadline = time.monotonic() + 30
        while _state(watched) != JobState.RUNNING and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _state(watched) == JobState.RUNNING
    finally:
        stop.set()
        thread.join(timeout=15)

    _set_phase(control_plane, synced, "Completed")
    job_sync.job_status_sync(cluster=cluster)
    assert _state(synced) == JobState.SUCCEEDED
