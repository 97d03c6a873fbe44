"""Fault injection through the Python API and over HTTP."""

import json
import time
import urllib.request

import pytest
import urllib3
from kubernetes import client
from kubernetes.client import ApiException


def _create(core, name):
    return core.create_namespace({"metadata": {"name": name}})


def test_count_fault_answers_instead_of_the_store(sandbox, k8s):
    core = client.CoreV1Api(k8s)
    sandbox.faults.add(verb="create", resource="namespaces", status=500, reason="InternalError", message="boom",
                       count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as exc:
            _create(core, "a")
        assert exc.value.status == 500
        assert json.loads(exc.value.body)["message"] == "boom"
        with pytest.raises(ApiException):
            core.read_namespace("a")  # no side effect
    assert _create(core, "a").metadata.name == "a"
    assert sandbox.faults.list() == []


def test_fault_matching_by_verb_resource_and_name(sandbox, k8s):
    core = client.CoreV1Api(k8s)
    sandbox.faults.add(verb="get", resource="configmaps", name="x", status=503, reason="ServiceUnavailable")
    core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "y"}})
    core.read_namespaced_config_map("y", "default")
    core.list_namespaced_config_map("default")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("x", "default")
    assert exc.value.status == 503 and exc.value.reason == "Service Unavailable"


def test_fraction_is_seeded_and_deterministic(sandbox, k8s):
    core = client.CoreV1Api(k8s)

    def pattern():
        sandbox.faults.clear()
        sandbox.faults.add(verb="list", resource="namespaces", status=500, fraction=0.5, seed=42)
        outcome = []
        for _ in range(20):
            try:
                core.list_namespace()
                outcome.append(True)
            except ApiException:
                outcome.append(False)
        return outcome

    first = pattern()
    assert 3 < first.count(False) < 17
    assert pattern() == first


def test_delay_only_fault_slows_then_serves(sandbox, k8s):
    core = client.CoreV1Api(k8s)
    sandbox.faults.add(verb="list", resource="namespaces", status=None, delay=0.3)
    started = time.monotonic()
    assert core.list_namespace().items
    assert time.monotonic() - started >= 0.3
    sandbox.faults.add(verb="list", resource="namespaces", status=None, delay=1.0)
    # The client ignores a float _request_timeout (only int or a (connect, read) tuple count). With retries off
    # the read timeout surfaces instead of being retried away.
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_namespace(_request_timeout=(1, 0.2))


def test_apply_fault_and_wildcards(sandbox, k8s):
    fault_id = sandbox.faults.add(verb="*", resource="*", status=429, reason="TooManyRequests", count=1)
    assert sandbox.faults.list()[0]["id"] == fault_id
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(k8s).list_namespace()
    assert exc.value.status == 429


def test_stats_count_requests_and_writes(sandbox, k8s):
    core = client.CoreV1Api(k8s)
    sandbox.reset_stats()
    _create(core, "a")
    core.read_namespace("a")
    core.patch_namespace("a", {"metadata": {"labels": {"kubernetes.io/metadata.name": "a"}}})  # a no-op
    stats = sandbox.stats()
    assert stats == {"requests": 3, "by_verb": {"create": 1, "get": 1, "patch": 1}, "writes": 1}


def _http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_fault_api_over_http(sandbox, k8s):
    fault = _http("POST", f"{sandbox.url}/_sandbox/faults", {"verb": "delete", "resource": "namespaces",
                                                             "status": 500, "count": 3})
    assert fault["id"] and fault["count"] == 3
    assert [f["id"] for f in _http("GET", f"{sandbox.url}/_sandbox/faults")["faults"]] == [fault["id"]]
    _http("DELETE", f"{sandbox.url}/_sandbox/faults")
    assert sandbox.faults.list() == []
    with pytest.raises(urllib.error.HTTPError) as exc:
        _http("POST", f"{sandbox.url}/_sandbox/faults", {"verb": "explode"})
    assert exc.value.code == 400
    assert _http("GET", f"{sandbox.url}/_sandbox/healthz") == {"status": "ok"}
    client.CoreV1Api(k8s).list_namespace()
    assert _http("GET", f"{sandbox.url}/_sandbox/stats")["by_verb"]["list"] >= 1
    assert _http("POST", f"{sandbox.url}/_sandbox/stats/reset")["requests"] == 0
