"""The web tier under load: 50 and 200 concurrent users against gunicorn on the production stack (PostgreSQL,
Redis, PORTAL_MODE=production), for the two worker models: two synchronous workers, and the threaded workers of
gunicorn.conf.py. Loopback only, each run bounded in time.

Each user is one keep-alive connection sending requests back to back (no think time: the worst case) from an
asyncio load generator in this process: its personal access token on the API (its teams, job list, quota, a job
submitted one request in ten) and the readiness probe. Reports throughput, p50/p95/p99 per endpoint and 5xx.
Submitted jobs are stored (and counted); no worker runs here, so none reaches a cluster in this section.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.request

from bench.support import ROOT, django_setup, free_port, table, test_database

SECONDS = float(os.environ.get("BENCH_LOAD_SECONDS", "15"))
USERS = (50, 200)
ENDPOINTS = {
    "GET /api/v1/me/": ("GET", "/api/v1/me/", None),
    "GET /api/v1/jobs/": ("GET", "/api/v1/jobs/", None),
    "GET /api/v1/teams/{slug}/quotas/": ("GET", "/api/v1/teams/{slug}/quotas/", None),
    "POST /api/v1/jobs/": ("POST", "/api/v1/jobs/", "submit"),
    "GET /readyz": ("GET", "/readyz", None),
}
MIX = ["GET /api/v1/me/"] * 2 + ["GET /api/v1/jobs/"] * 3 + ["GET /api/v1/teams/{slug}/quotas/"] * 2 + \
    ["POST /api/v1/jobs/"] + ["GET /readyz"] * 2
MODELS = {"sync, 2 workers": ["--worker-class", "sync", "--workers", "2"],
          "gthread, 2 workers × 8 threads (gunicorn.conf.py)": []}
TEAMS = 20


def _seed() -> list[tuple[str, str]]:
    """TEAMS teams in one cluster, each with a member, a token, quota and 200 finished jobs."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from jobs.models import Job
    from quotas.models import Quota
    from tenants.choices import Role
    from tenants.models import Cluster, GpuFlavor, Membership, PriorityTier, Team, TeamNamespace
    from tenants.services import access_token_create

    cluster = Cluster.objects.create(name="load", server="http://127.0.0.1:9")
    flavor = GpuFlavor.objects.create(cluster=cluster, name="h100", capacity=100000)
    tier = PriorityTier.objects.create(name="standard", value=1000, is_default=True)
    users = []
    for n in range(TEAMS):
        team = Team.objects.create(slug=f"team-{n}", name=f"Team {n}")
        TeamNamespace.objects.create(team=team, cluster=cluster)
        Quota.objects.create(team=team, flavor=flavor, guaranteed=64, burst=0, cpu_cores=4096, memory_gib=65536)
        user = get_user_model().objects.create_user(f"user-{n}", f"user-{n}@example.com", "x")
        Membership.objects.create(team=team, user=user, role=Role.MEMBER)
        now = timezone.now()
        Job.objects.bulk_create([
            Job(team=team, cluster=cluster, flavor=flavor, priority_tier=tier, kind="batch", name=f"run-{k}",
                image="ghcr.io/acme/train:1.2", command=["python", "main.py"], state="succeeded", submitted_by=user,
                submitted_at=now - timedelta(minutes=k)) for k in range(200)])
        users.append((team.slug, access_token_create(actor=user, name="load")[1]))
    return users


async def _request(reader, writer, method: str, path: str, token: str, body: bytes) -> int:
    head = (f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    writer.write(head.encode() + body)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length, chunked = 0, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
        elif name.lower() == "transfer-encoding" and "chunked" in value:
            chunked = True
    if chunked:
        while (size := int((await reader.readline()).strip() or b"0", 16)) > 0:
            await reader.readexactly(size + 2)
        await reader.readline()
    else:
        await reader.readexactly(length)
    return status


async def _user(port: int, slug: str, token: str, deadline: float, samples: dict, seq) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    rng = random.Random(hash(token))
    try:
        while time.monotonic() < deadline:
            name = rng.choice(MIX)
            method, path, kind = ENDPOINTS[name]
            body = b""
            if kind == "submit":
                body = json.dumps({"team": slug, "kind": "batch", "name": f"load-{next(seq)}", "flavor": "h100",
                                   "image": "ghcr.io/acme/train:2", "command": ["python", "main.py"],
                                   "workers": 1, "gpus_per_worker": 1}).encode()
            began = time.perf_counter()
            try:
                status = await asyncio.wait_for(_request(reader, writer, method, path.format(slug=slug), token,
                                                         body), timeout=60)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                status = 599  # the connection broke or timed out: counted as a server error
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            samples.setdefault(name, []).append((time.perf_counter() - began, status))
    finally:
        writer.close()


async def _run(port: int, users: list[tuple[str, str]], count: int) -> tuple[dict, float]:
    import itertools

    samples: dict[str, list] = {}
    seq = itertools.count()
    started = time.monotonic()
    deadline = started + SECONDS
    await asyncio.gather(*(_user(port, *users[i % len(users)], deadline, samples, seq) for i in range(count)))
    return samples, time.monotonic() - started


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Gunicorn:
    def __init__(self, db_url: str, redis_url: str, extra: list[str]):
        self.port = free_port()
        env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": redis_url, "PORTAL_MODE": "production",
               "SECRET_KEY": "bench-" + "x" * 50, "ALLOWED_HOSTS": "localhost,127.0.0.1",
               "SECURE_SSL_REDIRECT": "false", "LOG_LEVEL": "WARNING", "WEB_ACCESS_LOG": "",
               "CELERY_DEFAULT_QUEUE": "bench-load", "WEB_BIND": f"127.0.0.1:{self.port}"}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", *extra,
                                         "--log-level", "warning", "config.wsgi:application"], cwd=ROOT, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self):
        deadline = time.monotonic() + 60
        while True:
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{self.port}/healthz", headers={"Host": "localhost"})
                urllib.request.urlopen(request, timeout=2).read()
                return self
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.process.kill()
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.2)

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=30)


def run() -> str:
    django_setup()
    from django.conf import settings
    from django.db import connection

    from jobs.models import Job

    title = "## Web tier under load (50 and 200 users, gunicorn, production settings)\n\n"
    redis_url = os.environ.get("REDIS_URL", "")
    if connection.vendor != "postgresql" or not redis_url:
        return title + "Not run: needs `DATABASE_URL` (PostgreSQL) and `REDIS_URL`, the production stack.\n"
    rows, summary = [], []
    with test_database():
        users = _seed()
        db = settings.DATABASES["default"]
        db_url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        for model, extra in MODELS.items():
            with Gunicorn(db_url, redis_url, extra) as server:
                for count in USERS:
                    before = Job.objects.count()
                    samples, wall = asyncio.run(_run(server.port, users, count))
                    stored = Job.objects.count() - before
                    every = [s for values in samples.values() for s in values]
                    errors = sum(1 for _, status in every if status >= 500)
                    submitted = sum(1 for _, status in samples.get("POST /api/v1/jobs/", []) if status == 201)
                    summary.append([model, count, f"{len(every) / wall:.0f}",
                                    f"{_percentile([t for t, _ in every], 0.5) * 1000:.0f} ms",
                                    f"{_percentile([t for t, _ in every], 0.99) * 1000:.0f} ms", errors,
                                    f"{submitted} / {stored}"])
                    for name in ENDPOINTS:
                        times = [t for t, _ in samples.get(name, [])]
                        if times:
                            rows.append([model, count, name, len(times), f"{statistics.median(times) * 1000:.0f}",
                                         f"{_percentile(times, 0.95) * 1000:.0f}",
                                         f"{_percentile(times, 0.99) * 1000:.0f}",
                                         sum(1 for _, s in samples[name] if s >= 500)])
        import redis

        redis.Redis.from_url(redis_url).delete("bench-load")  # the nudges no worker took
    return (
        title
        + f"{SECONDS:g} s per run; each user a keep-alive connection sending back to back (no think time) from an "
        "asyncio generator on the same machine, as one of "
        f"{TEAMS} team members with a token (each team 200 jobs). Mix: 20 % `me/`, 30 % job list, 20 % quota, "
        "10 % job submission, 20 % `/readyz`. *Submitted / stored*: 201 answers against rows written (equal: "
        "nothing lost or doubled).\n\n"
        + table(["worker model", "users", "requests/s", "p50", "p99", "5xx", "submitted / stored"], summary)
        + "\n\nPer endpoint (ms):\n\n"
        + table(["worker model", "users", "endpoint", "requests", "p50", "p95", "p99", "5xx"], rows)
        + "\n"
    )
