"""Server-side apply: create, update, field removal, conflicts between managers, force, no-op applies."""

import http.client
import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from sandbox.testing import dynamic_client


def _apply(k8s, body, manager, force=False, name="cfg", status=200):
    """PATCH with application/apply-patch+yaml through the client's generic call path; returns the parsed object."""
    query = [("fieldManager", manager)] + ([("force", "true")] if force else [])
    response = k8s.call_api(f"/api/v1/namespaces/default/configmaps/{name}", "PATCH", query_params=query,
                            body=body, header_params={"Content-Type": "application/apply-patch+yaml",
                                                      "Accept": "application/json"},
                            _preload_content=False, _return_http_data_only=False)
    data, code = json.loads(response[0].data), response[1]
    assert code == status
    return data


def _cm(data, labels=None):
    meta = {"name": "cfg", **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def test_apply_creates_then_updates(k8s):
    created = _apply(k8s, _cm({"a": "1"}), "portal", status=201)
    assert created["metadata"]["managedFields"][0]["manager"] == "portal"
    assert created["metadata"]["managedFields"][0]["operation"] == "Apply"
    assert created["metadata"]["managedFields"][0]["fieldsType"] == "FieldsV1"
    assert created["metadata"]["managedFields"][0]["fieldsV1"] == {"f:data": {"f:a": {}}}
    updated = _apply(k8s, _cm({"a": "2", "b": "3"}), "portal")
    assert updated["data"] == {"a": "2", "b": "3"}


def test_apply_accepts_yaml_body(sandbox):
    # The official client always sends JSON (valid YAML); kubectl sends YAML.
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: '1'\n"
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port)
    conn.request("PATCH", "/api/v1/namespaces/default/configmaps/cfg?fieldManager=kubectl", body,
                 {"Content-Type": "application/apply-patch+yaml"})
    response = conn.getresponse()
    assert response.status == 201 and json.loads(response.read())["data"] == {"a": "1"}
    conn.close()


def test_reapply_without_a_field_removes_it_but_not_others_fields(k8s):
    _apply(k8s, _cm({"a": "1", "b": "2"}, {"team": "x"}), "portal", status=201)
    _apply(k8s, _cm({"other": "o"}), "someone-else")
    result = _apply(k8s, _cm({"a": "1"}), "portal")
    assert result["data"] == {"a": "1", "other": "o"}
    assert "labels" not in result["metadata"]


def test_unchanged_apply_is_not_a_write(sandbox, k8s):
    first = _apply(k8s, _cm({"a": "1"}), "portal", status=201)
    sandbox.reset_stats()
    again = _apply(k8s, _cm({"a": "1"}), "portal")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert sandbox.stats()["writes"] == 0 and sandbox.stats()["by_verb"] == {"apply": 1}


def test_conflict_between_managers_and_force(k8s):
    _apply(k8s, _cm({"a": "1", "shared": "mine"}), "portal", status=201)
    with pytest.raises(ApiException) as exc:
        _apply(k8s, _cm({"shared": "theirs"}), "intruder")
    assert exc.value.status == 409
    body = json.loads(exc.value.body)
    assert body["reason"] == "Conflict"
    assert body["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "portal"',
                                          "field": ".data.shared"}]
    # Same value: no conflict, shared ownership.
    _apply(k8s, _cm({"shared": "mine"}), "agreeing")
    forced = _apply(k8s, _cm({"shared": "theirs"}), "intruder", force=True)
    assert forced["data"]["shared"] == "theirs"
    managers = {e["manager"]: e["fieldsV1"] for e in forced["metadata"]["managedFields"]}
    assert managers["portal"] == {"f:data": {"f:a": {}}}
    assert managers["intruder"] == {"f:data": {"f:shared": {}}}


def test_apply_requires_field_manager(k8s):
    with pytest.raises(ApiException) as exc:
        k8s.call_api("/api/v1/namespaces/default/configmaps/cfg", "PATCH", body=_cm({"a": "1"}),
                     header_params={"Content-Type": "application/apply-patch+yaml"})
    assert exc.value.status == 400


def test_apply_dry_run_creates_nothing(k8s):
    k8s.call_api("/api/v1/namespaces/default/configmaps/cfg", "PATCH", body=_cm({"a": "1"}),
                 query_params=[("fieldManager", "p"), ("dryRun", "All")],
                 header_params={"Content-Type": "application/apply-patch+yaml"})
    with pytest.raises(ApiException):
        client.CoreV1Api(k8s).read_namespaced_config_map("cfg", "default")


def test_dynamic_client_server_side_apply_on_custom_kind(sandbox):
    dyn = dynamic_client(sandbox)
    queues = dyn.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue")
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"cohortName": "c", "namespaceSelector": {}}}
    created = dyn.server_side_apply(queues, body=body, field_manager="portal", force_conflicts=True)
    assert created.metadata.generation == 1
    body["spec"]["cohortName"] = "d"
    updated = dyn.server_side_apply(queues, body=body, field_manager="portal", force_conflicts=True)
    assert updated.spec.cohortName == "d" and updated.metadata.generation == 2
    again = dyn.server_side_apply(queues, body=body, field_manager="portal", force_conflicts=True)
    assert again.metadata.resourceVersion == updated.metadata.resourceVersion


def test_apply_to_status_subresource(k8s, sandbox):
    dyn = dynamic_client(sandbox)
    queues = dyn.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue")
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {}, "status": {"pendingWorkloads": 3}}
    created = dyn.server_side_apply(queues, body=body, field_manager="portal")
    assert "status" not in created.to_dict()  # the main resource ignores status
    client.CustomObjectsApi(k8s).patch_cluster_custom_object_status(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq", {"status": {"pendingWorkloads": 2}})
    assert queues.get(name="cq").status.pendingWorkloads == 2
