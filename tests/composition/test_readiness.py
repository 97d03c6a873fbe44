"""`/readyz` says whether this pod can serve: its database. A GPU cluster or the broker that is away is reported
(`?verbose`, the console, the metrics) but never takes the web tier out of service."""

import socket

import pytest
from django.test import override_settings

from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_cluster_and_the_broker_that_are_away_leave_the_pod_ready(client):
    ClusterFactory(name="east", server=f"http://127.0.0.1:{_closed_port()}")
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{_closed_port()}/0"):
        plain = client.get("/readyz")
        verbose = client.get("/readyz?verbose")
    assert plain.status_code == 200 and plain.json() == {"status": "ok", "checks": {"database": {"ok": True,
                                                                                                 "detail": ""}}}
    assert verbose.status_code == 200
    body = verbose.json()
    assert body["status"] == "degraded"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is False and body["checks"]["cluster:east"]["ok"] is False


def test_a_database_that_is_away_makes_the_pod_unready(client, monkeypatch):
    from composition import views

    monkeypatch.setattr(views, "_database", lambda: (False, "connection refused"))
    response = client.get("/readyz?verbose")
    assert response.status_code == 503 and response.json()["status"] == "unavailable"
    assert list(response.json()["checks"]) == ["database"]
