"""A real Celery worker process on the real Redis broker, reconciling into a standalone sandbox process."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from config import celery_app
from portal.reconciled import SyncState
from tenants import services
from tenants.models import TeamNamespace
from tests.factories import ClusterFactory, PlatformAdminFactory
from tests.requires import unavailable

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _require(condition: bool, why: str):
    if not condition:
        unavailable(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, timeout=30.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def _http(method, url, body=None):
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read() or b"null")


@pytest.fixture
def standalone_sandbox():
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "-m", "sandbox", "serve", "--port", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def healthy():
        try:
            _http("GET", f"{url}/_sandbox/healthz")
            return True
        except OSError:
            return False

    assert _wait_for(healthy, timeout=20), "the standalone sandbox did not start"
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def worker(settings):
    redis_url = os.environ.get("REDIS_URL", "")
    _require(redis_url.startswith("redis://"), "REDIS_URL is not set: the real-worker test needs Redis")
    _require(connection.vendor == "postgresql", "the real-worker test shares the test database: needs PostgreSQL")
    db = settings.DATABASES["default"]
    test_db_url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    queue = f"test-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "DATABASE_URL": test_db_url, "REDIS_URL": redis_url, "CELERY_DEFAULT_QUEUE": queue}
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
         "-Q", queue, "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    previous = (celery_app.conf.task_always_eager, celery_app.conf.broker_url, celery_app.conf.task_default_queue)
    celery_app.conf.update(task_always_eager=False, broker_url=redis_url, task_default_queue=queue)
    try:
        yield process
    finally:
        celery_app.conf.update(task_always_eager=previous[0], broker_url=previous[1], task_default_queue=previous[2])
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def test_worker_reconciles_an_approval_into_the_standalone_sandbox_and_survives_faults(standalone_sandbox, worker):
    cluster = ClusterFactory(server=standalone_sandbox)
    # The API server fails the first namespace apply: the worker must record it and the due sweep converge it.
    _http("POST", f"{standalone_sandbox}/_sandbox/faults",
          {"verb": "apply", "resource": "namespaces", "status": 503, "reason": "ServiceUnavailable", "count": 1})
    team = services.team_create(actor=PlatformAdminFactory(), slug="worker-team", name="Worker Team")
    row = TeamNamespace.objects.get(team=team, cluster=cluster)

    def state():
        row.refresh_from_db()
        return row.sync_state

    assert _wait_for(lambda: state() == SyncState.RETRYING), f"worker never reported the 503 (state {state()})"
    assert "ServiceUnavailable" in row.sync_message
    TeamNamespace.objects.filter(pk=row.pk).update(next_attempt_at=row.next_attempt_at.replace(year=2000))
    from composition.tasks import reconcile_due_task

    reconcile_due_task.delay()
    assert _wait_for(lambda: state() == SyncState.APPLIED), f"did not converge (state {state()})"
    namespace = _http("GET", f"{standalone_sandbox}/api/v1/namespaces/worker-team")
    assert namespace["metadata"]["labels"]["gpu-portal.io/team"] == "worker-team"
