"""Fixtures for the sandbox's own tests: self-contained (no Django, no database)."""

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
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
