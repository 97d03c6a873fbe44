"""The production shape: settings that pass `check --deploy`, and a docker-compose file that is complete."""

import os
import subprocess
import sys
from pathlib import Path

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
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("postgres", "redis", "web", "worker", "beat"):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no health check"
    assert "gunicorn" in services["web"]["command"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "portal", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "portal", "beat"]
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert env["PORTAL_MODE"] == "production"
        assert env["DATABASE_URL"].startswith("postgres://") and env["REDIS_URL"].startswith("redis://")
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert (ROOT / services["web"]["build"] / "Dockerfile").exists()
