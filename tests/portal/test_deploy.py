"""The production shape: settings that pass `check --deploy`, and a docker-compose file that is complete."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args, env_extra):
    dropped = {"DATABASE_URL", "REDIS_URL", "PORTAL_MODE", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(env_extra)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_production_settings_pass_check_deploy():
    result = run_manage(
        "check", "--deploy", "--fail-level", "WARNING",
        env_extra={"PORTAL_MODE": "production", "SECRET_KEY": "x" * 64 + "-production-secret-for-the-check",
                   "DATABASE_URL": "postgres://portal@127.0.0.1:5432/portal", "ALLOWED_HOSTS": "portal.example.com",
                   "REDIS_URL": "redis://127.0.0.1:6379/0"},
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key():
    result = run_manage("check", env_extra={"PORTAL_MODE": "production", "DATABASE_URL": "sqlite:///x",
                                            "ALLOWED_HOSTS": "h"})
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr


def test_docker_compose_has_the_production_services_with_health_checks():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "watcher"} <= set(services)
    for name in ("postgres", "redis", "web", "worker", "beat", "watcher"):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no health check"
    assert "gunicorn" in services["web"]["command"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "config", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "config", "beat"]
    assert services["watcher"]["command"][:3] == ["python", "manage.py", "watch_clusters"]
    for name in ("web", "worker", "beat", "watcher"):
        env = services[name]["environment"]
        assert env["PORTAL_MODE"] == "production"
        assert env["DATABASE_URL"].startswith("postgres://") and env["REDIS_URL"].startswith("redis://")
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert (ROOT / services["web"]["build"] / "Dockerfile").exists()
    # The web health check calls the container on 127.0.0.1; production host checks must let that through.
    probe = " ".join(services["web"]["healthcheck"]["test"])
    assert "/healthz" in probe and "'Host': 'localhost'" in probe
    assert services["web"]["environment"]["ALLOWED_HOSTS"].split(",")[-1] == "localhost"


OIDC_ENV = {"OIDC_RP_CLIENT_ID": "gpu-portal", "OIDC_RP_CLIENT_SECRET": "oidc-client-secret",
            "OIDC_OP_ISSUER": "https://idp.example.com",
            "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://idp.example.com/authorize",
            "OIDC_OP_TOKEN_ENDPOINT": "https://idp.example.com/token",
            "OIDC_OP_USER_ENDPOINT": "https://idp.example.com/userinfo",
            "OIDC_OP_JWKS_ENDPOINT": "https://idp.example.com/jwks"}
PRODUCTION_ENV = {"PORTAL_MODE": "production", "SECRET_KEY": "x" * 64 + "-production-secret-for-the-check",
                  "DATABASE_URL": "postgres://portal@127.0.0.1:5432/portal", "ALLOWED_HOSTS": "portal.example.com",
                  "REDIS_URL": "redis://127.0.0.1:6379/0"}


def test_production_settings_with_single_sign_on_pass_check_deploy():
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env_extra={**PRODUCTION_ENV, **OIDC_ENV})
    assert result.returncode == 0, result.stdout + result.stderr
    urls = run_manage("shell", "-c", "from django.urls import reverse; print(reverse('oidc_authentication_init'))",
                      env_extra={**PRODUCTION_ENV, **OIDC_ENV})
    assert urls.stdout.strip().splitlines()[-1] == "/oidc/authenticate/", urls.stderr


def test_single_sign_on_half_configured_refuses_to_start_and_names_what_is_missing():
    partial = {k: v for k, v in OIDC_ENV.items() if k not in {"OIDC_OP_JWKS_ENDPOINT", "OIDC_OP_ISSUER"}}
    result = run_manage("check", env_extra={**PRODUCTION_ENV, **partial})
    assert result.returncode != 0
    assert "OIDC_OP_ISSUER, OIDC_OP_JWKS_ENDPOINT" in result.stderr


@pytest.mark.django_db
def test_a_personal_access_token_never_reaches_the_logs(caplog):
    from rest_framework.test import APIClient

    from tenants import services
    from tests.factories import UserFactory

    user = UserFactory()
    _, raw = services.access_token_create(actor=user, name="notebook")
    revoked, revoked_raw = services.access_token_create(actor=user, name="old")
    services.access_token_revoke(actor=user, token=revoked)
    client = APIClient()
    with caplog.at_level(logging.DEBUG):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert client.get("/api/v1/me/").status_code == 200
        assert client.get("/api/v1/teams/no-such-team/").status_code == 404
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {revoked_raw}")
        assert client.get("/api/v1/me/").status_code == 401
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw[:-4]}abcd")
        assert client.get("/api/v1/teams/").status_code == 401
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__}" for r in caplog.records)
    assert caplog.records, "nothing was logged: the check would prove nothing"
    # The secret part is everything after "gpp_<prefix>_" (it may itself contain "_").
    for secret in (raw, revoked_raw, raw.split("_", 2)[2], revoked_raw.split("_", 2)[2]):
        assert secret not in logged


def test_production_throttles_count_in_redis_shared_by_every_worker():
    result = run_manage("shell", "-c", "from django.conf import settings; print(settings.CACHES['default']['BACKEND'])",
                        env_extra=PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "portal.cache.RedisCache"


def test_every_web_server_uses_the_threaded_worker_configuration(monkeypatch, tmp_path):
    """The image, compose and the Deployment all start gunicorn with gunicorn.conf.py: threaded workers, sized by
    WEB_WORKERS and WEB_THREADS (two synchronous workers queued every request behind the slow ones)."""
    import runpy

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # what the file would set for its workers
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert (config["worker_class"], config["workers"], config["threads"]) == ("gthread", 2, 8)
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    deployment = next(doc for doc in yaml.safe_load_all((ROOT / "deploy/kustomize/web.yaml").read_text())
                      if doc["kind"] == "Deployment")
    commands = [services["web"]["command"], deployment["spec"]["template"]["spec"]["containers"][0]["command"],
                json.loads((ROOT / "Dockerfile").read_text().split("CMD ", 1)[1].splitlines()[0])]
    for command in commands:
        assert command[:3] == ["gunicorn", "-c", "gunicorn.conf.py"], command
