"""Job list API (issue 7): a team with 10,000 jobs, pages of 50, token auth, against a floor measured in the same run.

The floor is a bare Django view (bench/api_urls.py) returning the same 50 rows, with the same fields, from one raw
SQL query serialised with json.dumps: no authentication, no framework. Two measurements, each as a ratio to it:
requests per second and p99 latency under 16 concurrent keep-alive connections to gunicorn, and CPU per request
in-process. Also the queries one page costs for a team with 10 jobs and one with 10,000 (they must be equal).
"""

import http.client
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import timedelta

from bench.support import ROOT, django_setup, free_port, table, test_database

JOBS = 10_000
CONCURRENCY = 16
REQUESTS_PER_CONNECTION = 60
CPU_REQUESTS = 60  # per round
CPU_ROUNDS = 10
HTTP_ROUNDS = 3
UNTHROTTLED = "100000000/min"  # the bench measures cost, not the request budget


def _seed():
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from jobs.models import Job
    from tenants.choices import Role
    from tenants.models import Cluster, GpuFlavor, Membership, PriorityTier, Team
    from tenants.services import access_token_create

    user_model = get_user_model()
    cluster = Cluster.objects.create(name="bench", server="http://127.0.0.1:9")
    flavor = GpuFlavor.objects.create(cluster=cluster, name="h100", capacity=1024)
    tier = PriorityTier.objects.create(name="standard", value=1000, is_default=True)
    teams, tokens = {}, {}
    for slug, count in (("big", JOBS), ("neighbour", JOBS), ("small", 10)):
        team = Team.objects.create(slug=slug, name=slug.title())
        user = user_model.objects.create_user(f"{slug}-user", f"{slug}@example.com", "x")
        Membership.objects.create(team=team, user=user, role=Role.MEMBER)
        now = timezone.now()
        Job.objects.bulk_create([
            Job(team=team, cluster=cluster, flavor=flavor, priority_tier=tier, kind="pytorch", name=f"run-{n}",
                image="ghcr.io/acme/train:1.2", command=["torchrun", "train.py"], workers=2, gpus_per_worker=4,
                state="succeeded", state_message="Finished", submitted_by=user,
                submitted_at=now - timedelta(minutes=n), admitted_at=now - timedelta(minutes=n - 1),
                started_at=now - timedelta(minutes=n - 1), finished_at=now - timedelta(seconds=n))
            for n in range(count)], batch_size=2000)
        teams[slug], tokens[slug] = team, access_token_create(actor=user, name="bench")[1]
    return teams, tokens


def _queries_per_page(tokens) -> dict[str, int]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    counts = {}
    for slug in ("small", "big"):
        client = Client(HTTP_AUTHORIZATION=f"Bearer {tokens[slug]}")
        client.get("/api/v1/jobs/")  # first use records last-used; count the steady state
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/v1/jobs/").status_code == 200
        counts[slug] = len(queries)
    return counts


def _cpu_per_request(client, path: str) -> float:
    started = time.process_time()
    for _ in range(CPU_REQUESTS):
        client.get(path)
    return (time.process_time() - started) / CPU_REQUESTS


def _in_process(teams, tokens) -> dict[str, float]:
    """CPU per request of the floor, the API for the big team, and the API for the small one beside it: the best of
    CPU_ROUNDS interleaved rounds each (noise on a shared machine only ever adds time)."""
    from django.conf import settings
    from django.test import Client
    from django.urls import clear_url_caches

    settings.ROOT_URLCONF, settings.DEBUG, settings.API_THROTTLE_RATE = "bench.api_urls", False, UNTHROTTLED
    clear_url_caches()
    cases = {"floor": (Client(), f"/floor/jobs/{teams['big'].pk}/"),
             "api": (Client(HTTP_AUTHORIZATION=f"Bearer {tokens['big']}"), "/api/v1/jobs/"),
             "api_small": (Client(HTTP_AUTHORIZATION=f"Bearer {tokens['small']}"), "/api/v1/jobs/")}
    for client, path in cases.values():
        for _ in range(20):
            response = client.get(path)
            assert response.status_code == 200, response.content[:200]
    rounds = {name: [] for name in cases}
    for _ in range(CPU_ROUNDS):
        for name, (client, path) in cases.items():
            rounds[name].append(_cpu_per_request(client, path))
    return {name: min(times) for name, times in rounds.items()}


class Gunicorn:
    """The portal under gunicorn (2 workers × 8 threads: 16 requests at once) on the bench database."""

    def __init__(self, db_url: str, cache_url: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "DATABASE_URL": db_url, "DJANGO_SETTINGS_MODULE": "bench.api_settings",
               "DJANGO_DEBUG": "0", "API_THROTTLE_RATE": UNTHROTTLED, "LOG_LEVEL": "WARNING", "CACHE_URL": cache_url}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{self.port}",
             "--workers", "2", "--threads", "8", "--worker-class", "gthread", "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self):
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=1).read()
                return self
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.process.kill()
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.1)

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=20)


def _load(port: int, path: str, headers: dict) -> dict:
    """16 keep-alive connections, each sending REQUESTS_PER_CONNECTION requests back to back."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(CONCURRENCY + 1)

    def connection():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        for n in range(5 + REQUESTS_PER_CONNECTION):
            if n == 5:
                start.wait()  # warmed up: every connection open, every worker's first request done
            began = time.perf_counter()
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200 or b'"results"' not in body:
                with lock:
                    errors.append(f"{response.status} {body[:120]!r}")
            if n >= 5:
                mine.append(time.perf_counter() - began)
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=connection) for _ in range(CONCURRENCY)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, e.g. {errors[0]}")
    ordered = sorted(latencies)
    return {"rps": len(latencies) / wall, "p99": ordered[int(0.99 * (len(ordered) - 1))],
            "median": statistics.median(ordered)}


def _over_http(db_url: str, cache_url: str, teams, tokens) -> dict[str, dict]:
    floor_path, api_path = f"/floor/jobs/{teams['big'].pk}/", "/api/v1/jobs/"
    auth = {"Authorization": f"Bearer {tokens['big']}"}
    results = {"floor": [], "api": []}
    with Gunicorn(db_url, cache_url) as server:
        for _ in range(HTTP_ROUNDS):  # interleaved; each measure is its median round, so one noisy round is ignored
            results["floor"].append(_load(server.port, floor_path, {}))
            results["api"].append(_load(server.port, api_path, auth))
    return {name: {measure: statistics.median(r[measure] for r in runs) for measure in runs[0]}
            for name, runs in results.items()}


def run() -> str:
    django_setup()
    from django.conf import settings
    from django.db import connection
    from django.test import override_settings

    title = "## Job list API (10,000 jobs, page of 50, token auth)\n\n"
    cache_url = os.environ.get("REDIS_URL", "")
    if connection.vendor != "postgresql" or not cache_url:
        return title + ("Not run: needs `DATABASE_URL` (PostgreSQL), which gunicorn's workers share with the bench, "
                        "and `REDIS_URL`, where production counts each token's requests.\n")
    # As in production, the throttle counts in Redis: in this process and in gunicorn's workers.
    redis_cache = {"default": {"BACKEND": "portal.cache.RedisCache", "LOCATION": cache_url, "KEY_PREFIX": "bench-api"}}
    with test_database(), override_settings(CACHES=redis_cache):
        teams, tokens = _seed()
        db = settings.DATABASES["default"]
        db_url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        queries = _queries_per_page(tokens)
        cpu = _in_process(teams, tokens)
        http_results = _over_http(db_url, cache_url, teams, tokens)
    floor, api = http_results["floor"], http_results["api"]
    cpu_ratio = cpu["api"] / cpu["floor"]
    rps_ratio = floor["rps"] / api["rps"]
    p99_ratio = api["p99"] / floor["p99"]
    return (
        title
        + f"`GET /api/v1/jobs/` for a member of a team with {JOBS:,} jobs (another team holds {JOBS:,} more), pages of "
        "50 with the cursor, `Authorization: Bearer`, against the floor: a bare Django view returning the same 50 rows "
        "and fields from one raw SQL query with `json.dumps` (no auth, no framework). The API counts each request "
        "against the token's throttle in Redis, as in production. HTTP: gunicorn, 2 workers × 8 "
        f"threads, {CONCURRENCY} keep-alive connections × {REQUESTS_PER_CONNECTION} requests from a Python thread "
        f"pool on the same machine, the median of {HTTP_ROUNDS} interleaved rounds; CPU: rounds of {CPU_REQUESTS} "
        f"requests in-process (Django test client), the best of {CPU_ROUNDS} interleaved rounds. Cost ratios are API "
        "÷ floor; target ≤ 2×.\n\n"
        + table(["measure", "floor", "API", "cost ratio"], [
            ["CPU per request (in-process)", f"{cpu['floor'] * 1000:.2f} ms", f"{cpu['api'] * 1000:.2f} ms",
             f"**{cpu_ratio:.2f}×**"],
            ["requests/s (16 connections)", f"{floor['rps']:.0f}", f"{api['rps']:.0f}", f"**{rps_ratio:.2f}×**"],
            ["p99 latency", f"{floor['p99'] * 1000:.1f} ms", f"{api['p99'] * 1000:.1f} ms", f"**{p99_ratio:.2f}×**"],
            ["median latency", f"{floor['median'] * 1000:.1f} ms", f"{api['median'] * 1000:.1f} ms",
             f"{api['median'] / floor['median']:.2f}×"],
        ])
        + "\n\nQueries per page (steady state, after the token's first use): "
        + f"{queries['small']} for a team with 10 jobs, {queries['big']} for a team with {JOBS:,}. CPU per request "
        + f"for the 10-job team beside the {2 * JOBS:,} others: {cpu['api_small'] * 1000:.2f} ms "
        + f"({cpu['api_small'] / cpu['api']:.2f}× the big team's page of 50).\n"
    )
