"""Watch: initial state, ordering, resourceVersion resume, 410 for expired history, timeoutSeconds."""

import threading
import time

import pytest
from kubernetes import client, watch
from kubernetes.client import ApiException

from sandbox import Sandbox
from sandbox.testing import api_client


def test_watch_stream_sees_existing_then_changes_in_order(k8s):
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": "before"}})

    def writer():
        time.sleep(0.1)
        core.create_namespace({"metadata": {"name": "during"}})
        core.patch_namespace("during", {"metadata": {"labels": {"x": "1"}}})
        core.delete_namespace("during")

    thread = threading.Thread(target=writer)
    thread.start()
    seen = []
    for event in watch.Watch().stream(core.list_namespace, timeout_seconds=2):
        seen.append((event["type"], event["object"].metadata.name, int(event["object"].metadata.resource_version)))
        if event["type"] == "DELETED":
            break
    thread.join()
    names = [(t, n) for t, n, _ in seen]
    assert ("ADDED", "before") in names and ("ADDED", "default") in names
    # A deleted namespace is first Terminating (MODIFIED), then gone once its contents are.
    assert names[-4:] == [("ADDED", "during"), ("MODIFIED", "during"), ("MODIFIED", "during"), ("DELETED", "during")]
    live = [rv for _, _, rv in seen[-4:]]
    assert live == sorted(live)


def test_watch_from_resource_version_and_selectors(k8s):
    core = client.CoreV1Api(k8s)
    core.create_namespaced_config_map("default", {"metadata": {"name": "old", "labels": {"a": "1"}}})
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "new", "labels": {"a": "1"}}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "other", "labels": {"a": "2"}}})
    events = list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=rv,
                                       label_selector="a=1", timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "new")]


def test_watch_timeout_seconds_ends_the_stream(k8s):
    started = time.monotonic()
    events = list(watch.Watch().stream(client.CoreV1Api(k8s).list_namespaced_config_map, "default",
                                       timeout_seconds=1))
    assert events == []
    assert 0.9 <= time.monotonic() - started < 3


def test_watch_too_old_resource_version_is_410():
    with Sandbox() as sb:
        sb.store._history_size = 5  # a tiny history makes expiry quick to reach
        core = client.CoreV1Api(api_client(sb))
        for i in range(10):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
        with pytest.raises(ApiException) as exc:
            list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version="1",
                                      timeout_seconds=1))
        assert exc.value.status == 410


def test_history_is_bounded(sandbox, k8s):
    sandbox.store._history_size = 50
    core = client.CoreV1Api(k8s)
    for i in range(120):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    assert len(sandbox.store._history[("", "ConfigMap")]) == 50
