"""The demo server (`manage.py runserver`, a thread per HTTP connection) against each database, as a person runs it:
on PostgreSQL it leaves no connection open per thread, on SQLite two writers at once both succeed (no "database is
locked" 500)."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
import requests
from django.db import connection

from tests.conftest import require_postgresql

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(database_url: str, tmp_path) -> dict:
    dropped = {"DATABASE_URL", "REDIS_URL", "CACHE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE", "DJANGO_SETTINGS_MODULE"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    # The demo's own default: persistent connections (runserver must override it).
    env.update({"DATABASE_URL": database_url, "PORTAL_VAR_DIR": str(tmp_path), "DATABASE_CONN_MAX_AGE": "60",
                "LOG_LEVEL": "WARNING"})
    return env


@contextmanager
def runserver(env: dict):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "manage.py", "runserver", "--noreload", "--skip-checks",
                               f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                requests.get(f"{base}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                assert server.poll() is None, server.stderr.read()
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def _manage(env: dict, *args: str) -> str:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


# --- PostgreSQL: no connection per thread -------------------------------------------------------------------------


def _server_connections(dsn: str, database: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
                            " AND application_name <> 'pytest'", [database]).fetchone()[0]


@pytest.mark.django_db
def test_runserver_on_postgresql_keeps_no_connection_per_thread(tmp_path):
    require_postgresql()
    params = connection.get_connection_params()
    database = connection.settings_dict["NAME"]  # the test database: migrated, and ours alone
    dsn = " ".join(f"{k}={params[k]}" for k in ("host", "port", "user", "password") if params.get(k))
    dsn += " dbname=postgres"
    user = quote(connection.settings_dict["USER"] or "postgres")
    password = connection.settings_dict["PASSWORD"]
    credentials = f"{user}:{quote(password)}" if password else user
    url = f"postgres://{credentials}@{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}/{database}"
    # Everything this test holds is marked, so only the server's connections are counted.
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SET application_name = 'pytest'")
    before = _server_connections(dsn, database)
    with runserver(_env(url, tmp_path)) as base:
        for _ in range(15):  # one HTTP connection (so one server thread) each
            assert requests.get(f"{base}/readyz", timeout=30).status_code == 200
        sessions = [requests.Session() for _ in range(15)]  # kept alive: their threads stay
        threads = [threading.Thread(target=lambda s=s: s.get(f"{base}/readyz", timeout=30)) for s in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.5)
        held = _server_connections(dsn, database)
        for s in sessions:
            s.close()
    # 30 requests on 30 threads, 15 of them still alive: no connection is left behind by any of them.
    assert held - before == 0


# --- SQLite: two writers at once ----------------------------------------------------------------------------------

SETUP = """
import json
from tenants.choices import Role
from tenants.services import access_token_create
from tests.factories import (ClusterFactory, GpuFlavorFactory, MembershipFactory, TeamFactory, TeamNamespaceFactory,
                             UserFactory)
cluster = ClusterFactory(name="east")
flavor = GpuFlavorFactory(cluster=cluster, name="h100", capacity=64)
team = TeamFactory(slug="nlp")
TeamNamespaceFactory(team=team, cluster=cluster)
tokens = []
for name in ("ada", "bob"):
    user = MembershipFactory(team=team, user=UserFactory(username=name), role=Role.MEMBER).user
    tokens.append(access_token_create(actor=user, name="race")[1])
print(json.dumps({"flavor": flavor.pk, "tokens": tokens}))
"""


def test_runserver_on_sqlite_lets_two_writers_race_without_a_500(tmp_path):
    env = _env(f"sqlite:///{tmp_path / 'portal.sqlite3'}", tmp_path)
    _manage(env, "migrate", "--noinput")
    world = json.loads(_manage(env, "shell", "-c", SETUP).strip().splitlines()[-1])
    body = {"team": "nlp", "flavor_id": world["flavor"], "guaranteed_units": 1,
            "justification": "Racing another writer for the lock"}
    statuses = []
    with runserver(env) as base:
        sessions = [requests.Session() for _ in world["tokens"]]
        for session, token in zip(sessions, world["tokens"], strict=True):
            session.headers["Authorization"] = f"Bearer {token}"

        def write(session, start):
            start.wait()
            statuses.append(session.post(f"{base}/api/v1/quota-requests/", json=body, timeout=60).status_code)

        for _ in range(15):
            start = threading.Barrier(2)
            threads = [threading.Thread(target=write, args=(s, start)) for s in sessions]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert statuses == [201] * 30
