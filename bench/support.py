"""Helpers shared by the portal's benchmarks: a throwaway database, a standalone sandbox, timing."""

import contextlib
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def django_setup():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from config import celery_app

    celery_app.conf.task_always_eager = True


@contextlib.contextmanager
def tasks_queued():
    """Tasks sent inside are queued (to an in-memory broker nobody reads), as a worker would get them, instead of
    run inline: what a measured call hands to other tasks is not counted in its time."""
    from config import celery_app

    before = celery_app.conf.task_always_eager, celery_app.conf.broker_url
    celery_app.conf.update(task_always_eager=False, broker_url="memory://")
    try:
        yield
    finally:
        celery_app.conf.update(task_always_eager=before[0], broker_url=before[1])


@contextlib.contextmanager
def test_database():
    """A fresh database (SQLite in memory, or test_<name> on PostgreSQL), destroyed afterwards."""
    from django.db import connection
    from django.test.utils import setup_test_environment, teardown_test_environment

    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def standalone_sandbox():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "-m", "sandbox", "serve", "--port", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(f"{url}/_sandbox/healthz", timeout=1).read()
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("standalone sandbox did not start") from None
            time.sleep(0.05)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def sandbox_stats(url: str) -> dict:
    return json.loads(urllib.request.urlopen(f"{url}/_sandbox/stats", timeout=5).read())


def sandbox_reset_stats(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{url}/_sandbox/stats/reset", method="POST"), timeout=5).read()


def raw_applies(url: str, objects: list[dict], field_manager: str = "bench") -> float:
    """The floor: server-side applies from a bare keep-alive HTTP client, no portal code. Returns seconds."""
    from portal.kube import path_for

    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"}
    started = time.perf_counter()
    for obj in objects:
        meta = obj["metadata"]
        path = path_for(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        conn.request("PATCH", f"{path}?fieldManager={field_manager}&force=true", json.dumps(obj), headers)
        response = conn.getresponse()
        response.read()
        if response.status >= 300:
            raise RuntimeError(f"floor apply failed: {response.status} {path}")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def median(values):
    return statistics.median(values)


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
