"""Job status sync at 5,000 active jobs against the standalone sandbox, and the job list's query count at 10 and
10,000 jobs. (The sandbox simulator's own figures are bench_simulator's.)"""

import http.client
import json
import time
from urllib.parse import quote

from bench.support import (
    django_setup,
    raw_applies,
    sandbox_reset_stats,
    sandbox_stats,
    standalone_sandbox,
    table,
    tasks_queued,
    test_database,
)

JOBS = 5000
NAMESPACES = 50
LIST_JOBS = 10000


def _world(url: str, namespaces: int):
    from django.contrib.auth import get_user_model

    from tenants.choices import Role
    from tenants.models import Cluster, GpuFlavor, Membership, PriorityTier, Team

    cluster = Cluster.objects.create(name="bench", server=url, scheduler="kueue", cohort="bench")
    flavor = GpuFlavor.objects.create(cluster=cluster, name="h100", resource_name="nvidia.com/gpu",
                                      gpu_model="H100", capacity=100000, gpus_per_node=8, memory_gb=80)
    tier = PriorityTier.objects.create(name="standard", value=1000, is_default=True)
    teams = Team.objects.bulk_create([Team(slug=f"team-{i:03d}", name=f"Team {i}") for i in range(namespaces)])
    user = get_user_model().objects.create_user("bench-member")
    Membership.objects.bulk_create([Membership(team=t, user=user, role=Role.MEMBER) for t in teams])
    return cluster, flavor, tier, teams, user


def _jobs(cluster, flavor, tier, teams, user, count: int, state: str):
    from jobs.models import Job

    return Job.objects.bulk_create(
        Job(team=teams[i % len(teams)], cluster=cluster, flavor=flavor, priority_tier=tier, kind="batch",
            name=f"eval-{i}", image="ghcr.io/acme/eval:1", command=["python", "eval.py"], submitted_by=user,
            state=state) for i in range(count))


def _seed_cluster(url: str, jobs) -> None:
    """Namespaces, each job's objects, and a running status on every other job, written over bare HTTP."""
    from jobs import selectors

    namespaces = sorted({job.team.namespace for job in jobs})
    raw_applies(url, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces])
    objects = [obj for job in jobs for obj in selectors.job_desired(job=job)]
    raw_applies(url, objects)
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Type": "application/merge-patch+json", "Accept": "application/json"}
    for i, job in enumerate(jobs[::2]):
        path = f"/apis/batch/v1/namespaces/{job.team.namespace}/jobs/{job.object_name}/status"
        # Start times have one-second resolution: jobs that started between two syncs share a few dozen of them.
        body = {"status": {"startTime": f"2026-11-22T10:00:{i % 30:02d}Z", "active": 1, "ready": 1}}
        conn.request("PATCH", path, json.dumps(body), headers)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, (path, response.status)
    conn.close()


def _floor(url: str, paths: list[str]) -> float:
    """The same lists from a bare keep-alive HTTP client that only decodes the answers."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    started = time.perf_counter()
    for path in paths:
        conn.request("GET", path, headers={"Accept": "application/json"})
        response = conn.getresponse()
        json.loads(response.read())
        assert response.status == 200, (path, response.status)
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def _sync_paths(cluster, namespaces: list[str]) -> list[str]:
    """Exactly the lists job_status_sync makes: one per job kind and per scheduler record, per namespace."""
    from jobs import selectors
    from portal.kube import path_for
    from portal.naming import managed_selector

    selector = quote(managed_selector())
    paths = []
    for ns in namespaces:
        paths += [f"{path_for(v, k, ns)}?labelSelector={selector}"
                  for v, k in selectors.job_kinds(cluster.scheduler, claims=False)]
        paths.append(path_for("kueue.x-k8s.io/v1beta2", "Workload", ns))
    return paths


def _list_queries(user) -> int:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(user)
    client.get("/jobs/")
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/jobs/")
    assert response.status_code == 200, response.status_code
    return len(queries)


def run() -> str:
    django_setup()
    from jobs import estimates
    from jobs import sync as job_sync
    from jobs.models import Job
    from portal import kube

    with test_database(), standalone_sandbox() as url:
        cluster, flavor, tier, teams, user = _world(url, NAMESPACES)
        created = _jobs(cluster, flavor, tier, teams, user, JOBS, "queued")
        jobs = list(Job.objects.filter(pk__in=[j.pk for j in created]).select_related(
            "team", "cluster", "flavor", "priority_tier"))
        _seed_cluster(url, jobs)
        namespaces = sorted({t.namespace for t in teams})
        kube.client_for_cluster(cluster)  # a worker's first contact with a cluster loads the client, once

        with tasks_queued():  # the estimates refresh a changed cluster sends is a task of its own, timed below
            sandbox_reset_stats(url)
            started = time.perf_counter()
            first_counts = job_sync.job_status_sync(cluster=cluster)
            first = time.perf_counter() - started
            first_stats = sandbox_stats(url)

            sandbox_reset_stats(url)
            started = time.perf_counter()
            steady_counts = job_sync.job_status_sync(cluster=cluster)
            steady = time.perf_counter() - started
            steady_stats = sandbox_stats(url)
        started = time.perf_counter()
        estimated = estimates.job_estimates_refresh(cluster=cluster)
        refresh = time.perf_counter() - started
        floor = _floor(url, _sync_paths(cluster, namespaces))
        running = Job.objects.filter(state="running").count()

    with test_database():
        cluster, flavor, tier, teams, user = _world("http://127.0.0.1:9", 10)
        _jobs(cluster, flavor, tier, teams, user, 10, "running")
        small = _list_queries(user)
        _jobs(cluster, flavor, tier, teams, user, LIST_JOBS - 10, "running")
        big = _list_queries(user)

    rows = [
        ["active jobs / namespaces", f"{JOBS:,} / {NAMESPACES}", f"{running:,} found running on the first sync"],
        ["API requests per sync", steady_stats["requests"],
         f"**{steady_stats['requests'] / JOBS:.3f} per job**; {NAMESPACES} namespaces × "
         f"{steady_stats['requests'] // NAMESPACES} lists (target: one list per kind per namespace)"],
        ["floor: the same lists over bare HTTP", f"{floor:.2f} s", ""],
        ["first sync (updates rows)", f"{first:.2f} s", f"**{first / floor:.2f}× the floor**, "
                                                         f"{first_counts['changed']:,} rows changed, "
                                                         f"{first_stats['requests']} requests"],
        ["steady sync (nothing changed)", f"{steady:.2f} s", f"**{steady / floor:.2f}× the floor**, "
                                                              f"{steady_counts['changed']} rows changed, "
                                                              f"{steady_stats['writes']} cluster writes"],
        ["estimates refresh (its own task, sent by the first sync)", f"{refresh:.2f} s",
         f"{estimated:,} estimates written"],
    ]
    queries = [["job list (/jobs/)", small, big]]
    return (
        f"## Job status sync of {JOBS:,} active jobs (standalone sandbox)\n\n"
        "Kueue batch Jobs spread over the namespaces, half of them found running (30 distinct start times) by the "
        "first sync, which writes one UPDATE per distinct change. The floor makes the same list calls with a bare "
        "keep-alive HTTP client that only decodes the answers, in the same run. The syncs run in a process that has "
        "talked to the cluster before (the client loaded), and the estimates refresh a changed cluster sends is "
        "queued as in production and timed on its own.\n\n"
        + table(["measure", "value", "ratio / note"], rows)
        + f"\n\n### SQL queries of the job list (target: the same at 10 and {LIST_JOBS:,} jobs)\n\n"
        + table(["page", "10 jobs", f"{LIST_JOBS:,} jobs"], queries)
        + "\n"
    )
