"""Fixtures for the sandbox's own tests: self-contained (no Django, no database)."""

import os
import socket

import pytest

from sandbox import Sandbox
from sandbox.testing import api_client


@pytest.fixture
def sandbox():
    """A fresh, started sandbox (core kinds plus the builtin permissive custom kinds), stopped afterwards."""
    with Sandbox() as sb:
        yield sb


@pytest.fixture
def k8s(sandbox):
    """An official-client ApiClient for `sandbox`, with urllib3 retries off so faults are seen as they happen."""
    client = api_client(sandbox, retries=0)
    yield client
    client.close()


@pytest.fixture
def crds_dir():
    path = os.environ.get("CRDS_DIR", "")
    if not path or not os.path.isdir(path):
        if os.environ.get("REQUIRE_CRDS"):
            pytest.fail(f"CRDS_DIR={path!r} is not a directory, and this run requires the upstream CRDs")
        pytest.skip("CRDS_DIR is not set: upstream CRD validation not run")
    return path


@pytest.fixture
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
