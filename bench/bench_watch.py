"""Live job status at 5,000 active jobs: the cluster watcher against the polling sync, in the same run.

Delay: a job's status is patched in the standalone sandbox at a random moment; the delay is from the patch's answer
to the row's new state in the database (read every 10 ms). The polling sync runs as beat runs it, every
JOB_SYNC_SECONDS. API requests per hour: the watcher's at steady state (watches re-opened every
WATCH_TIMEOUT_SECONDS; measured over a window with a short timeout, then scaled to the default), the polling
sync's from one sync's request count × syncs per hour.
"""

import random
import threading
import time

from bench.bench_jobs import NAMESPACES, _jobs, _seed_cluster, _world
from bench.support import (
    django_setup,
    median,
    sandbox_reset_stats,
    sandbox_stats,
    standalone_sandbox,
    table,
    test_database,
)

JOBS = 5000
CHANGES = 60
WINDOW = 30.0  # seconds over which the watcher's steady requests are counted
SHORT_TIMEOUT = 10  # WATCH_TIMEOUT_SECONDS during that window


def _percentile(values, p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def _patch_running(client, job) -> float:
    from portal import kube

    path = kube.path_for("batch/v1", "Job", job.team.namespace, job.object_name)
    client._call("PATCH", path + "/status", body={"status": {"startTime": "2026-11-22T11:00:00Z", "active": 1,
                                                             "ready": 1}},
                 content_type="application/merge-patch+json")
    return time.monotonic()


def _delays(client, jobs, spread: float) -> list[float]:
    """Patch each job to running at a random moment within `spread` s; the delays until each row says so."""
    from django.db import connection

    from jobs.models import Job

    plan = sorted((random.uniform(0, spread), job) for job in jobs)
    patched: dict[int, float] = {}
    seen: dict[int, float] = {}
    start = time.monotonic()

    def watcher_of_rows():
        pending = {job.pk for job in jobs}
        deadline = start + spread + 60
        while pending and time.monotonic() < deadline:
            now = time.monotonic()
            for pk in Job.objects.filter(pk__in=list(pending), state="running").values_list("pk", flat=True):
                seen[pk] = now
                pending.discard(pk)
            time.sleep(0.01)
        connection.close()

    reader = threading.Thread(target=watcher_of_rows)
    reader.start()
    for at, job in plan:
        time.sleep(max(0.0, start + at - time.monotonic()))
        patched[job.pk] = _patch_running(client, job)
    reader.join()
    return [seen[pk] - patched[pk] for pk in patched if pk in seen]


def _poll_loop(cluster, stop, period: float, durations: list[float]) -> None:
    from django.db import connection

    from jobs import sync as job_sync

    while not stop.is_set():
        started = time.monotonic()
        job_sync.job_status_sync(cluster=cluster)
        durations.append(time.monotonic() - started)
        stop.wait(max(0.0, period - (time.monotonic() - started)))
    connection.close()


def run() -> str:
    django_setup()
    from django.conf import settings
    from django.test.utils import override_settings

    from jobs import sync as job_sync
    from jobs.models import Job
    from jobs.watch import ClusterWatcher
    from portal import kube

    with test_database(), standalone_sandbox() as url:
        cluster, flavor, tier, teams, user = _world(url, NAMESPACES)
        created = _jobs(cluster, flavor, tier, teams, user, JOBS, "queued")
        jobs = list(Job.objects.filter(pk__in=[j.pk for j in created]).select_related("team", "cluster"))
        _seed_cluster(url, jobs)
        job_sync.job_status_sync(cluster=cluster)  # half the jobs now run: the rest are queued
        queued = list(Job.objects.filter(state="queued").select_related("team", "cluster"))
        random.seed(18)
        random.shuffle(queued)
        client = kube.client_for_cluster(cluster)

        # Polling, as beat runs it.
        period = settings.JOB_SYNC_SECONDS
        sandbox_reset_stats(url)
        job_sync.job_status_sync(cluster=cluster)
        poll_requests = sandbox_stats(url)["requests"]
        stop, durations = threading.Event(), []
        poller = threading.Thread(target=_poll_loop, args=(cluster, stop, period, durations))
        poller.start()
        poll_delays = _delays(client, queued[:CHANGES], spread=3 * period)
        stop.set()
        poller.join()

        # Watching.
        with override_settings(WATCH_TIMEOUT_SECONDS=SHORT_TIMEOUT, WATCH_LEASE_SECONDS=5):
            stop = threading.Event()
            watcher = ClusterWatcher(cluster, stop)
            thread = threading.Thread(target=watcher.run, daemon=True)
            started = time.monotonic()
            thread.start()
            while not watcher.cache.in_sync:
                time.sleep(0.05)
            initial = time.monotonic() - started
            sandbox_reset_stats(url)
            time.sleep(WINDOW)
            window_stats = sandbox_stats(url)
            watch_delays = _delays(client, queued[CHANGES:2 * CHANGES], spread=3 * period)
            stop.set()
            thread.join(timeout=30)
        kinds = len(watcher.cache._roles)

    polls_per_hour = poll_requests * 3600 / period
    watch_per_hour_short = window_stats["requests"] * 3600 / WINDOW
    watch_per_hour = watch_per_hour_short * SHORT_TIMEOUT / settings.WATCH_TIMEOUT_SECONDS
    ratio = polls_per_hour / max(watch_per_hour, 1e-9)
    rows = [
        ["changes measured", f"{len(poll_delays)} / {CHANGES}", f"{len(watch_delays)} / {CHANGES}", ""],
        ["p50 delay, cluster → row", f"{median(poll_delays):.2f} s", f"{median(watch_delays):.3f} s",
         f"**{median(poll_delays) / median(watch_delays):.0f}× sooner**"],
        ["p95 delay, cluster → row", f"{_percentile(poll_delays, 95):.2f} s",
         f"{_percentile(watch_delays, 95):.3f} s", "target: watch p95 < 1 s"],
        ["API requests per hour (steady)", f"{polls_per_hour:,.0f}", f"{watch_per_hour:,.0f}",
         f"**{ratio:,.0f}× fewer** (target ≥ 100×)"],
        ["how", f"{poll_requests} lists every {period} s (one sync: median {median(durations):.2f} s)",
         f"{kinds} watches re-opened every {settings.WATCH_TIMEOUT_SECONDS} s "
         f"({window_stats['requests']} requests in {WINDOW:.0f} s at a {SHORT_TIMEOUT} s timeout)",
         f"initial list of every kind: {initial:.2f} s"],
    ]
    return (
        f"## Live job status: watch against polling, {JOBS:,} active jobs in {NAMESPACES} namespaces "
        "(standalone sandbox)\n\n"
        f"{CHANGES} queued jobs each patched to running at a random moment over {3 * period} s, for each of the two "
        "ways; the delay runs from the patch's answer to the row's new state (read every 10 ms).\n\n"
        + table(["measure", "polling sync", "watcher", "ratio / target"], rows)
        + "\n"
    )
