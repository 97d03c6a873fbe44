"""Watch: initial state, ordering, resourceVersion resume, 410 for expired history, timeoutSeconds."""

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

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


def _raw_watch(sb, path: str, **params) -> list[dict]:
    """Every event of a watch request, read as the JSON lines a kube-apiserver streams (bookmarks included)."""
    query = urllib.parse.urlencode({"watch": "true", **params})
    with urllib.request.urlopen(f"{sb.url}{path}?{query}", timeout=10) as response:
        return [json.loads(line) for line in response if line.strip()]


def test_bookmarks_only_when_allowed_periodically_and_before_the_deadline():
    with Sandbox(bookmark_interval=0.4) as sb:
        core = client.CoreV1Api(api_client(sb))
        core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
        rv = core.list_namespaced_config_map("default").metadata.resource_version
        assert [e["type"] for e in _raw_watch(sb, "/api/v1/namespaces/default/configmaps", resourceVersion=rv,
                                              timeoutSeconds=1)] == []
        # Another kind's change moves the server on: the bookmark carries the newest resourceVersion.
        core.create_namespace({"metadata": {"name": "elsewhere"}})
        current = core.list_namespace().metadata.resource_version
        events = _raw_watch(sb, "/api/v1/namespaces/default/configmaps", resourceVersion=rv, timeoutSeconds=3,
                            allowWatchBookmarks="true")
        assert events and {e["type"] for e in events} == {"BOOKMARK"}
        assert len(events) >= 2  # every 0.4 s until 2 s before the deadline, then that one
        bookmark = events[-1]["object"]
        assert bookmark == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"resourceVersion": current}}


def test_no_bookmark_when_the_watch_is_shorter_than_the_pre_timeout_margin():
    with Sandbox(bookmark_interval=0.2) as sb:
        events = _raw_watch(sb, "/api/v1/namespaces/default/configmaps", timeoutSeconds=1, allowWatchBookmarks="1")
        assert events == []


def test_send_initial_events_ends_with_an_annotated_bookmark(sandbox, k8s):
    core = client.CoreV1Api(k8s)
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    events = _raw_watch(sandbox, "/api/v1/namespaces/default/configmaps", timeoutSeconds=1,
                        allowWatchBookmarks="true", sendInitialEvents="true", resourceVersionMatch="NotOlderThan")
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    with pytest.raises(urllib.error.HTTPError) as refused:  # a request that is invalid is refused, not streamed
        _raw_watch(sandbox, "/api/v1/namespaces/default/configmaps", timeoutSeconds=1, sendInitialEvents="true")
    assert refused.value.code == 422


def test_leaving_a_selector_is_deleted_with_the_previous_content(sandbox, k8s):
    core = client.CoreV1Api(k8s)
    core.create_namespaced_config_map("default", {"metadata": {"name": "a", "labels": {"team": "x"}},
                                                  "data": {"k": "1"}})
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"team": "y"}}, "data": {"k": "2"}})
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"team": "x"}}})
    events = _raw_watch(sandbox, "/api/v1/namespaces/default/configmaps", resourceVersion=rv,
                        labelSelector="team=x", timeoutSeconds=1)
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]
    left = events[0]["object"]
    assert left["data"] == {"k": "1"} and left["metadata"]["labels"] == {"team": "x"}
    assert int(left["metadata"]["resourceVersion"]) == int(rv) + 1


def test_a_resource_version_newer_than_the_server_is_too_large():
    with Sandbox() as sb:
        events = _raw_watch(sb, "/api/v1/namespaces/default/configmaps", resourceVersion="999999", timeoutSeconds=5)
        assert [e["type"] for e in events] == ["ERROR"]
        status = events[0]["object"]
        assert status["code"] == 504 and status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_a_restored_store_has_no_history_before_its_start(tmp_path):
    state = tmp_path / "state.json"
    with Sandbox(state_file=state) as sb:
        core = client.CoreV1Api(api_client(sb))
        core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
        old = int(core.list_namespaced_config_map("default").metadata.resource_version)
        core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
        current = core.list_namespaced_config_map("default").metadata.resource_version
    with Sandbox(state_file=state) as sb:
        core = client.CoreV1Api(api_client(sb))
        assert core.list_namespaced_config_map("default").metadata.resource_version == current
        events = _raw_watch(sb, "/api/v1/namespaces/default/configmaps", resourceVersion=str(old), timeoutSeconds=1)
        assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
        assert _raw_watch(sb, "/api/v1/namespaces/default/configmaps", resourceVersion=current,
                          timeoutSeconds=1) == []
