"""Fixtures for the sandbox's own tests: self-contained (no Django, no database, nothing of the portal's suite)."""

import os
import socket

import pytest

from sandbox import Sandbox
from sandbox.errors import ApiError
from sandbox.testing import api_client
from sandbox.tests.requires import unavailable


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


@pytest.fixture(scope="session")
def crds_dir():
    """The upstream CRDs (Kueue, Volcano, KubeRay); CI sets CRDS_DIR and REQUIRE_CRDS so these never skip there."""
    path = os.environ.get("CRDS_DIR", "")
    if not path or not os.path.isdir(path):
        unavailable(f"CRDS_DIR={path!r} is not a folder of CRDs: validation against the upstream CRDs was not run",
                    flag="REQUIRE_CRDS")
    return path


@pytest.fixture(scope="module")
def upstream_sandbox(crds_dir):
    """One sandbox per module serving the upstream CRDs (Kueue, Volcano, KubeRay) with their admission rules."""
    with Sandbox(crd_dirs=[crds_dir]) as sb:
        yield sb


class Objects:
    """Create/update objects in a store by their apiVersion and kind; `refused` returns the ApiError."""

    def __init__(self, store):
        self.store = store

    def rt(self, obj):
        return self.store.kind(obj["apiVersion"], obj["kind"])

    def create(self, obj, namespace="default", **kw):
        rt = self.rt(obj)
        version = obj["apiVersion"].split("/")[-1]
        return self.store.create(rt, obj, namespace if rt.namespaced else None, version=version, **kw)

    def refused(self, obj, namespace="default", **kw):
        with pytest.raises(ApiError) as exc:
            self.create(obj, namespace, **kw)
        return exc.value

    def patch(self, obj, body, namespace="default", patch_type="merge"):
        rt = self.rt(obj)
        return self.store.patch(rt, namespace if rt.namespaced else None, obj["metadata"]["name"], body, patch_type)

    def patch_refused(self, obj, body, namespace="default"):
        with pytest.raises(ApiError) as exc:
            self.patch(obj, body, namespace)
        return exc.value


@pytest.fixture(scope="module")
def objects(upstream_sandbox):
    return Objects(upstream_sandbox.store)
