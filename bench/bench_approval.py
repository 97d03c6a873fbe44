"""Approval → objects applied, with a real Celery worker on Redis and a standalone sandbox (issue: quotas)."""

import os
import statistics
import subprocess
import sys
import time

from bench.support import ROOT, django_setup, standalone_sandbox, table, test_database

APPROVALS = 100


def _percentile(values, pct):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def run() -> str:
    django_setup()
    from django.conf import settings
    from django.db import connection

    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url or connection.vendor != "postgresql":
        return ("## Approval to applied (real worker)\n\nNot run: needs `DATABASE_URL` (PostgreSQL) and `REDIS_URL`, "
                "so the worker process can share the database and broker.\n")
    from django.contrib.auth import get_user_model

    from composition import reconcile
    from config import celery_app
    from quotas import services as quota_services
    from tenants.models import Cluster, GpuFlavor, Team, TeamNamespace

    with test_database(), standalone_sandbox() as url:
        db = settings.DATABASES["default"]
        db_url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        queue = f"bench-{os.getpid()}"
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads", "--concurrency", "4",
             "-Q", queue, "--loglevel", "WARNING", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env={**os.environ, "DATABASE_URL": db_url, "CELERY_DEFAULT_QUEUE": queue},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        celery_app.conf.update(task_always_eager=False, broker_url=redis_url, task_default_queue=queue)
        try:
            admin = get_user_model().objects.create_superuser("bench", "b@example.com", "x")
            cluster = Cluster.objects.create(name="bench", server=url, cohort="bench")
            flavor = GpuFlavor.objects.create(cluster=cluster, name="h100", capacity=100_000)
            teams = [Team.objects.create(slug=f"t{i:03d}", name=f"T{i}") for i in range(APPROVALS)]
            rows = [TeamNamespace.objects.create(team=t, cluster=cluster) for t in teams]
            for row in rows:
                reconcile.team_namespace_reconcile(team_namespace_id=row.pk)
            time.sleep(2)  # the worker is up and connected
            latencies = []
            for team, row in zip(teams, rows, strict=True):
                request = quota_services.quota_request_create(actor=admin, team=team, flavor=flavor, guaranteed=8,
                                                              burst=4, cpu_cores=64, memory_gib=512,
                                                              justification="benchmark approval")
                quota_services.quota_request_approve(actor=admin, request=request)
                committed = time.perf_counter()
                target = TeamNamespace.objects.get(pk=row.pk).generation
                while True:
                    current = TeamNamespace.objects.get(pk=row.pk)
                    if current.observed_generation >= target and current.ready_condition.get("status") == "True":
                        break
                    if time.perf_counter() - committed > 30:
                        raise RuntimeError(f"approval for {team.slug} not applied in 30 s: {current.sync_message}")
                    time.sleep(0.005)
                latencies.append(time.perf_counter() - committed)
        finally:
            celery_app.conf.update(task_always_eager=True)
            worker.terminate()
            worker.wait(timeout=20)
    median, p95 = statistics.median(latencies), _percentile(latencies, 95)
    return (
        "## Approval to applied (real worker)\n\n"
        f"{APPROVALS} approvals one after another; each timed from the approval's commit until the team's namespace "
        "row reports the new generation applied (ResourceQuota, ClusterQueue, LocalQueue...) by a Celery worker "
        "(threads pool, 4) on Redis, against a standalone sandbox. Target: p95 under 2 s.\n\n"
        + table(["median", "p95", "max"], [[f"{median * 1000:.0f} ms", f"**{p95 * 1000:.0f} ms**",
                                             f"{max(latencies) * 1000:.0f} ms"]])
        + "\n"
    )
