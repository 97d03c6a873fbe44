"""The fault suite (`pytest -m faults`, run by .ci/run): real processes stopped under the portal while it works,
each test asserting that no write is lost or made twice, that no row is left stuck, and that everything converges
within a stated time once the fault is gone.

- Redis (a private redis-server on its own port; the shared one is never touched) stopped while the API serves and
  jobs are submitted, then restarted: the API answers throughout, nothing is lost, the due sweep sends what the
  broker missed (converged within one due cycle).
- A sandbox cluster (a standalone process) stopped while quota is approved and jobs are submitted, then restarted on
  its kept state: every write is stored and answered at once, and the rows converge within 30 s of its return.
- The only Celery worker killed (SIGKILL) inside its cluster writes: nothing is written twice, nothing is left
  stuck, and a new worker converges from the due sweep within 30 s of being ready.
- A private PostgreSQL (initdb in a temporary directory) stopped for 30 s under a running `watch_clusters`: the
  watcher outlives it and writes what the cluster did meanwhile within 30 s of the database's return.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.test import override_settings

from config import celery_app
from jobs.models import Job
from portal import kube
from portal.reconciled import SyncState
from tenants.models import TeamNamespace
from tests.kueue_queues import flavor_quota
from tests.requires import unavailable

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
CONVERGE_SECONDS = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check, seconds: float, what: str, step: float = 0.2):
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds:g} s")
        time.sleep(step)


class PrivateRedis:
    """redis-server on a free loopback port, no persistence: stopped and started again by the test."""

    def __init__(self):
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            unavailable("redis-server is not installed: the Redis fault test was not run")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self):
        self.process = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                         "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._answers, 10, "private redis-server to start")

    def _answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
        except OSError:
            return False
        return True

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def private_redis():
    redis = PrivateRedis()
    redis.start()
    yield redis
    redis.stop()


@pytest.fixture
def standalone(tmp_path):
    from tests.jobs.test_watch import Standalone

    sb = Standalone(tmp_path)
    sb.start()
    yield sb
    if sb.process.poll() is None:
        sb.stop()
    kube.forget_clients()


def job_objects(cluster, job) -> list[dict]:
    from jobs.manifests import JOB_LABEL

    client = kube.client_for_cluster(cluster)
    return client.list("batch/v1", "Job", namespace=job.team.namespace, label_selector=f"{JOB_LABEL}={job.pk}")


def submit_body(**overrides) -> dict:
    return {"team": "nlp", "kind": "batch", "name": "fault", "flavor": "h100", "image": "ghcr.io/acme/train:2",
            "command": ["python", "main.py"], "workers": 1, "gpus_per_worker": 1, **overrides}


def test_redis_stopped_and_restarted_under_the_api(standalone, private_redis):
    from rest_framework.test import APIClient

    from jobs import services as job_services
    from tests.api.world import token_for
    from tests.jobs.conftest import build_world

    world = build_world(standalone.url, "kueue")
    cache = {"default": {"BACKEND": "portal.cache.RedisCache", "LOCATION": private_redis.url,
                         "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}}
    eager, broker = celery_app.conf.task_always_eager, celery_app.conf.broker_url
    celery_app.conf.task_always_eager, celery_app.conf.broker_url = False, private_redis.url
    try:
        with override_settings(REDIS_URL=private_redis.url, CACHES=cache):
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(world['member'])}")
            assert client.get("/api/v1/me/").status_code == 200
            private_redis.stop()
            started = time.monotonic()
            assert client.get("/api/v1/me/").status_code == 200  # the throttle fails open
            first = client.post("/api/v1/jobs/", submit_body(), format="json", HTTP_IDEMPOTENCY_KEY="fault-1")
            retry = client.post("/api/v1/jobs/", submit_body(), format="json", HTTP_IDEMPOTENCY_KEY="fault-1")
            assert time.monotonic() - started < 15, "each request gave up on Redis quickly"
            assert (first.status_code, retry.status_code) == (201, 201), first.content
            assert retry.json()["id"] == first.json()["id"] and Job.objects.count() == 1
            job = Job.objects.get()
            assert job_objects(world["cluster"], job) == []  # the nudge was lost with the broker
            private_redis.start()
            started = time.monotonic()
            celery_app.conf.task_always_eager = True  # beat's due sweep, run here as the worker would
            job_services.job_reconcile_due()
            assert time.monotonic() - started < 5  # within one due cycle (RECONCILE_DUE_SECONDS)
            assert len(job_objects(world["cluster"], job)) == 1
            job.refresh_from_db()
            assert job.next_attempt_at is None and job.sync_state == SyncState.APPLIED, job.sync_message
            job_services.job_reconcile_due()
            assert len(job_objects(world["cluster"], job)) == 1  # not created twice
    finally:
        celery_app.conf.task_always_eager, celery_app.conf.broker_url = eager, broker


@override_settings(RECONCILE_BACKOFF_BASE_SECONDS=0.2, RECONCILE_BACKOFF_MAX_SECONDS=1)
def test_a_cluster_stopped_during_approvals_and_submissions(standalone, run_on_commit):
    from composition import reconcile
    from jobs import services as job_services
    from quotas import services as quota_services
    from tests.factories import PlatformAdminFactory
    from tests.jobs.conftest import build_world
    from tests.jobs.test_simulated import submit

    world = build_world(standalone.url, "kueue")
    cluster, team, member = world["cluster"], world["team"], world["member"]
    standalone.stop()
    request = quota_services.quota_request_create(actor=member, team=team, flavor=world["flavor"], guaranteed=16,
                                                  burst=8, cpu_cores=256, memory_gib=4096,
                                                  justification="More for the fault test")
    with run_on_commit():
        quota_services.quota_request_approve(actor=PlatformAdminFactory(), request=request)
    jobs = [submit(world, run_on_commit, name=f"during-{n}", kind="batch", workers=1, gpus_per_worker=1)
            for n in range(3)]
    row = TeamNamespace.objects.get(team=team, cluster=cluster)
    assert row.sync_state == SyncState.RETRYING and row.next_attempt_at is not None, row.sync_message
    assert all(Job.objects.get(pk=j.pk).next_attempt_at is not None for j in jobs)
    standalone.start()
    kube.forget_clients()
    returned = time.monotonic()

    def converged():
        reconcile.reconcile_due()
        job_services.job_reconcile_due()
        row.refresh_from_db()
        pending = Job.objects.filter(pk__in=[j.pk for j in jobs], next_attempt_at__isnull=False).exists()
        return row.sync_state == SyncState.APPLIED and not pending

    wait_until(converged, CONVERGE_SECONDS, "the team namespace and jobs after the cluster came back", step=0.3)
    took = time.monotonic() - returned
    queue = kube.client_for_cluster(cluster).get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "nlp")
    nominal = flavor_quota(queue, "h100", "nvidia.com/gpu")["nominalQuota"]
    assert nominal == "16"
    for job in jobs:
        assert len(job_objects(cluster, job)) == 1, job.name
    print(f"converged {took:.1f} s after the cluster returned")


def _postgres_binaries():
    """initdb and pg_ctl from PATH, else from Debian's versioned folder (the newest)."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    initdb = shutil.which("initdb") or next((str(p / "initdb") for p in versions if (p / "initdb").exists()), None)
    pg_ctl = shutil.which("pg_ctl") or next((str(p / "pg_ctl") for p in versions if (p / "pg_ctl").exists()), None)
    if not initdb or not pg_ctl:
        unavailable("initdb/pg_ctl are not installed: the PostgreSQL fault test was not run")
    return initdb, pg_ctl


def _as_postgres(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as the postgres user when we are root."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@pytest.fixture
def private_postgres():
    initdb, pg_ctl = _postgres_binaries()
    # Not under pytest's tmp_path: its parents are private to root, and the server runs as postgres.
    tmp_path = Path(tempfile.mkdtemp(prefix="gpu-portal-faults-pg-"))
    data = tmp_path / "pgdata"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(tmp_path, "postgres")
        shutil.chown(data, "postgres")
    port = free_port()
    subprocess.run(_as_postgres([initdb, "-D", str(data), "-U", "postgres", "--auth", "trust", "--no-sync"]),
                   check=True, capture_output=True)
    options = f"-p {port} -k {tmp_path} -c listen_addresses=127.0.0.1 -c fsync=off"

    def start():
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-o", options, "-l", str(tmp_path / "pg.log"),
                                     "-w", "start"]), check=True, capture_output=True)

    def stop():
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"]), check=True,
                       capture_output=True)

    start()
    yield {"url": f"postgres://postgres@127.0.0.1:{port}/postgres", "start": start, "stop": stop}
    subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_the_watcher_rides_out_a_database_stopped_for_30_seconds(private_postgres, standalone, tmp_path):
    """`watch_clusters` as its own process on a private PostgreSQL (migrated here), the database stopped for 30 s:
    the process is still running afterwards, and a job the cluster created meanwhile reaches its row."""
    env = {**os.environ, "DATABASE_URL": private_postgres["url"], "REDIS_URL": "", "CACHE_URL": "",
           "WATCH_RELIST_SECONDS": "1", "WATCH_BACKOFF_MAX_SECONDS": "2", "DATABASE_CONN_MAX_AGE": "0"}
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True,
                   timeout=600)
    seed = (
        "from tenants.models import Cluster;"
        f"Cluster.objects.create(name='east', connection='sandbox', server='{standalone.url}', scheduler='kueue')"
    )
    subprocess.run([*manage, "shell", "-c", seed], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    log = open(tmp_path / "watcher.log", "w")  # noqa: SIM115 - closed below
    watcher = subprocess.Popen([*manage, "watch_clusters"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(3)
        assert watcher.poll() is None, (tmp_path / "watcher.log").read_text()
        private_postgres["stop"]()
        time.sleep(30)
        assert watcher.poll() is None, "the watcher exited while the database was away:\n" + (
            tmp_path / "watcher.log").read_text()
        private_postgres["start"]()
        marker = (
            "from tenants.models import Cluster; import sys;"
            "sys.exit(0 if Cluster.objects.filter(name='west').exists() else 1)"
        )
        add = "from tenants.models import Cluster; Cluster.objects.create(name='west', connection='sandbox', " \
              f"server='{standalone.url}', scheduler='kueue')"
        subprocess.run([*manage, "shell", "-c", add], cwd=ROOT, env=env, check=True, capture_output=True,
                       timeout=120)
        subprocess.run([*manage, "shell", "-c", marker], cwd=ROOT, env=env, check=True, capture_output=True,
                       timeout=120)
        # The loop lists clusters again once the database answers: the new cluster gets its watcher.
        wait_until(lambda: "watching cluster west" in (tmp_path / "watcher.log").read_text(), CONVERGE_SECONDS,
                   "the watcher to list the clusters again after the database returned", step=0.5)
        assert watcher.poll() is None
    finally:
        watcher.send_signal(signal.SIGTERM)
        try:
            watcher.wait(timeout=20)
        except subprocess.TimeoutExpired:
            watcher.kill()
        log.close()


class Worker:
    """A real Celery worker (`celery -A config worker`, one process, the solo pool) on the test database and a queue
    of its own on CI's Redis, killed with SIGKILL as an out-of-memory kill or a lost node would."""

    def __init__(self, queue: str, log: Path):
        from tests.jobs.test_watch import _database_url

        broker = os.environ.get("REDIS_URL", "")
        if not broker.startswith("redis://"):
            unavailable("REDIS_URL is not set: the worker fault test needs Redis", flag="REQUIRE_SERVICES")
        self.env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": broker,
                    "CELERY_DEFAULT_QUEUE": queue, "RECONCILE_LEASE_SECONDS": "2"}
        self.broker, self.queue, self.log, self.process = broker, queue, log, None

    def start(self):
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
                 "--without-mingle", "--without-gossip", "--without-heartbeat"],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: " ready." in self.log.read_text() or self.process.poll() is not None, 60,
                   "the worker to start")
        assert self.process.poll() is None, self.log.read_text()[-3000:]

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.kill()


@override_settings(RECONCILE_LEASE_SECONDS=2)
def test_the_worker_killed_mid_reconcile(standalone, tmp_path):
    """SIGKILL to the only worker while it writes a quota approval's queues and a burst of jobs to the cluster (each
    write held for a second by the sandbox, so the kill lands inside one): nothing is created twice, no row is left
    applied without its objects, and a new worker converges everything from the due sweep within 30 s of being ready."""
    import json
    import urllib.request
    from contextlib import nullcontext  # no run_on_commit: the nudges go through the broker to the real worker

    from composition.tasks import reconcile_due_task
    from jobs.tasks import job_reconcile_due_task
    from quotas import services as quota_services
    from tests.factories import PlatformAdminFactory
    from tests.jobs.conftest import build_world
    from tests.jobs.test_simulated import submit

    world = build_world(standalone.url, "kueue")
    cluster, team, member = world["cluster"], world["team"], world["member"]

    def fault(**spec):
        request = urllib.request.Request(f"{standalone.url}/_sandbox/faults", data=json.dumps(spec).encode(),
                                         method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as answer:
            return json.load(answer)["id"]

    def hits() -> int:
        with urllib.request.urlopen(f"{standalone.url}/_sandbox/faults", timeout=5) as answer:
            return sum(f["hits"] for f in json.load(answer)["faults"])

    for verb in ("create", "patch", "apply"):
        fault(verb=verb, status=None, delay=1.0, fraction=1)  # every write, held for a second
    queue = f"faults-{os.getpid()}-{time.monotonic_ns()}"
    worker = Worker(queue, tmp_path / "worker.log")
    previous = (celery_app.conf.task_always_eager, celery_app.conf.broker_url, celery_app.conf.task_default_queue)
    celery_app.conf.update(task_always_eager=False, broker_url=worker.broker, task_default_queue=queue)
    try:
        worker.start()
        request = quota_services.quota_request_create(actor=member, team=team, flavor=world["flavor"],
                                                      guaranteed=16, burst=8, cpu_cores=256, memory_gib=4096,
                                                      justification="More for the worker fault test")
        quota_services.quota_request_approve(actor=PlatformAdminFactory(), request=request)
        jobs = [submit(world, nullcontext, name=f"killed-{n}", kind="batch", workers=1, gpus_per_worker=1)
                for n in range(4)]
        try:
            wait_until(lambda: hits() >= 2, 30, "the worker to be inside its cluster writes")
        except AssertionError:
            raise AssertionError((tmp_path / "worker.log").read_text()[-3000:]) from None
        worker.kill()
        killed_at = time.monotonic()
        written = {j.pk: len(job_objects(cluster, j)) for j in jobs}
        assert set(written.values()) <= {0, 1}, written
        assert 0 in written.values(), "the kill came after every job was written: the test proved nothing"
        for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
            if not written[job.pk]:
                assert job.next_attempt_at is not None, f"{job.name} has no objects and nothing will retry it"
        urllib.request.urlopen(urllib.request.Request(f"{standalone.url}/_sandbox/faults", method="DELETE"),
                               timeout=5).close()
        worker = Worker(queue, tmp_path / "worker.log")
        worker.start()
        ready = time.monotonic()
        row = TeamNamespace.objects.get(team=team, cluster=cluster)

        def converged():
            reconcile_due_task.delay()  # beat's due sweeps, sent through the broker to the new worker
            job_reconcile_due_task.delay()
            row.refresh_from_db()
            counts = [len(job_objects(cluster, j)) for j in jobs]
            assert max(counts) <= 1, counts  # never created twice, whatever ran again
            settled = not Job.objects.filter(pk__in=[j.pk for j in jobs], next_attempt_at__isnull=False).exists()
            return row.sync_state == SyncState.APPLIED and row.next_attempt_at is None and settled and \
                min(counts) == 1

        wait_until(converged, CONVERGE_SECONDS, "the approval and the jobs once a new worker was ready", step=1)
        queue = kube.client_for_cluster(cluster).get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "nlp")
        assert flavor_quota(queue, "h100", "nvidia.com/gpu")["nominalQuota"] == "16"
        print(f"converged {time.monotonic() - ready:.1f} s after the new worker was ready "
              f"({time.monotonic() - killed_at:.1f} s after the kill)")
    finally:
        worker.stop()
        celery_app.conf.update(task_always_eager=previous[0], broker_url=previous[1], task_default_queue=previous[2])
