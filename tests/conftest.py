import os

import pytest
from django.db import connections

from config import celery_app
from portal import kube
from sandbox.tests import conftest as sandbox_fixtures
from tests.requires import unavailable

# The upstream CRDs (CRDS_DIR; skipped on a laptop, failing in CI): the sandbox suite's fixture.
crds_dir = sandbox_fixtures.crds_dir


def pytest_configure(config):
    from django.conf import settings

    # Tasks run in-process unless a test starts a real worker; CI's REDIS_URL must not divert them.
    celery_app.conf.task_always_eager = True
    # Test users need no slow password hashing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Nothing is collected into STATIC_ROOT for the suite: WhiteNoise serves static files from the apps (finders).
    settings.WHITENOISE_USE_FINDERS = True
    # plotly.js comes from npm (package-lock.json); without it every chart in the browser tests stays blank.
    if not (settings.BASE_DIR / "static/vendor/plotly-cartesian.min.js").exists():
        raise pytest.UsageError("static/vendor/plotly-cartesian.min.js is missing: run `make install` (npm ci)")
    # Live-server threads must not keep connections open, or the test database cannot be dropped at the end.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0


def require_postgresql():
    from django.db import connection

    if connection.vendor != "postgresql":
        unavailable("needs PostgreSQL row locks: set DATABASE_URL to a PostgreSQL database")


@pytest.fixture
def admin_client(client):
    """The test client signed in as a platform admin (client.admin), for the Django admin."""
    from tests.factories import PlatformAdminFactory

    client.admin = PlatformAdminFactory(username="root-admin")
    client.force_login(client.admin)
    return client


@pytest.fixture
def sandbox():
    """A fresh, empty sandbox cluster on a free port, with the portal's custom kinds registered."""
    from sandbox import Sandbox

    with Sandbox() as sb:
        yield sb
    kube.forget_clients()


@pytest.fixture
def strict_sandbox(crds_dir):
    """A sandbox that validates custom kinds against the upstream CRDs, as a real API server would."""
    from sandbox import Sandbox

    with Sandbox(crd_dirs=[crds_dir], builtin_custom_kinds=True) as sb:
        yield sb
    kube.forget_clients()


@pytest.fixture
def run_on_commit(django_capture_on_commit_callbacks):
    """Execute transaction.on_commit callbacks (the reconcile nudges) as the block exits."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def browser(monkeypatch):
    """Real headless Chromium (Debian's package, CHROMIUM_PATH) driven by Playwright."""
    path = os.environ.get("CHROMIUM_PATH", "")
    if not path or not os.path.exists(path):
        unavailable("CHROMIUM_PATH is not set: the browser journey needs Debian's chromium")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        yield launched
        launched.close()
        # The ORM calls made while Playwright's loop ran used their own connection; close it before the
        # test database is dropped.
        connections.close_all()
