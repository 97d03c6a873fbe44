"""The API when what it leans on is away: the per-token throttle fails open (with a warning) while its Redis is
down, and every error under /api/, a crash or a database outage included, comes in the one error shape."""

import logging
import socket

import pytest
from django.db import OperationalError
from django.test import override_settings

from tenants import selectors as tenant_selectors
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
ME = "/api/v1/me/"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_throttle_fails_open_with_a_warning_while_its_redis_is_down(api_as, caplog):
    from portal import api

    api._last_warned[0] = 0.0
    down = {"default": {"BACKEND": "portal.cache.RedisCache", "LOCATION": f"redis://127.0.0.1:{_closed_port()}/0",
                        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}}
    client = api_as(UserFactory(username="erin"))
    with override_settings(CACHES=down), caplog.at_level(logging.WARNING, logger="portal.api"):
        responses = [client.get(ME) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 200]
    warnings = [r for r in caplog.records if "not throttled" in r.getMessage()]
    assert len(warnings) == 1  # once a minute per process, not once a request


@pytest.mark.parametrize(("error", "status", "code"), [
    (RuntimeError("a bug"), 500, "server_error"),
    (OperationalError("connection to server at 127.0.0.1 failed"), 503, "unavailable"),
])
def test_an_unexpected_error_under_api_is_in_the_error_shape(api_as, monkeypatch, error, status, code):
    def boom(**kwargs):
        raise error

    monkeypatch.setattr(tenant_selectors, "team_list", boom)
    client = api_as(UserFactory(username="erin"))
    client.raise_request_exception = False
    response = client.get("/api/v1/teams/")
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"]["code"] == code and body["error"]["fields"] == {}
    assert "a bug" not in body["error"]["message"] and "127.0.0.1" not in body["error"]["message"]


def test_a_page_outside_the_api_keeps_the_html_error_page(client, monkeypatch):
    from django.contrib.auth import views as auth_views

    def boom(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(auth_views.LoginView, "get", boom)
    client.raise_request_exception = False
    response = client.get("/login/")
    assert response.status_code == 500 and not response["Content-Type"].startswith("application/json")
