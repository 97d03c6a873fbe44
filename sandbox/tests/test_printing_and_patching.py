"""Strategic merge patch by merge keys, Table answers and printer columns, without kubectl (the kubectl suite drives
the same through the real client)."""

import json
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from sandbox.tables import human_duration, jsonpath

TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"


def _deployment(name="web"):
    return {"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
            {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
             "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "busybox:1.36"}]}}}}


def _patch(k8s, path, body):
    return k8s.call_api(path, "PATCH", body=body, response_type="object", _return_http_data_only=True,
                        header_params={"Content-Type": "application/strategic-merge-patch+json"})


def test_strategic_merge_by_merge_keys_and_directives(k8s):
    apps = client.AppsV1Api(k8s)
    apps.create_namespaced_deployment("default", _deployment())
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    patched = _patch(k8s, path, {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "B", "value": "2"}]}]}}}})
    containers = patched["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "sidecar"]
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert containers[0]["image"] == "nginx:1.27"
    patched = _patch(k8s, path, {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
        "containers": [{"name": "app", "$patch": "delete"}]}}}})
    assert [c["name"] for c in patched["spec"]["template"]["spec"]["containers"]] == ["sidecar"]


def test_strategic_merge_on_a_custom_resource_is_415(k8s):
    custom = client.CustomObjectsApi(k8s)
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj"}, "spec": {"entrypoint": "x"}})
    with pytest.raises(ApiException) as exc:
        _patch(k8s, "/apis/ray.io/v1/namespaces/default/rayjobs/rj", {"spec": {"entrypoint": "y"}})
    assert exc.value.status == 415 and json.loads(exc.value.body)["reason"] == "UnsupportedMediaType"


def _get_table(sandbox, path):
    request = urllib.request.Request(sandbox.url + path, headers={"Accept": TABLE})
    return json.loads(urllib.request.urlopen(request).read())


def test_tables_for_built_in_kinds(sandbox, k8s):
    client.CoreV1Api(k8s).create_namespaced_config_map("default", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    table = _get_table(sandbox, "/api/v1/namespaces/default/configmaps")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    row = table["rows"][0]
    assert row["cells"][:2] == ["cm", 1] and row["object"]["kind"] == "PartialObjectMetadata"
    pods = _get_table(sandbox, "/api/v1/namespaces/default/pods")
    assert [(c["name"], c["priority"]) for c in pods["columnDefinitions"]][-2:] == [("Nominated Node", 1),
                                                                                   ("Readiness Gates", 1)]
    single = _get_table(sandbox, "/api/v1/namespaces/default/configmaps/cm?includeObject=None")
    assert len(single["rows"]) == 1 and "object" not in single["rows"][0]


def test_tables_for_custom_kinds_use_printer_columns(upstream_sandbox):
    store = upstream_sandbox.store
    rt = store.kind("kueue.x-k8s.io/v1beta2", "ClusterQueue")
    store.create(rt, {"metadata": {"name": "printed"}, "spec": {"cohortName": "org"}})
    table = _get_table(upstream_sandbox, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    names = [c["name"] for c in table["columnDefinitions"]]
    expected = [c["name"] for c in rt.printer_columns["v1beta2"]]
    assert names == ["Name", *expected] and "Cohort" in names
    row = next(r for r in table["rows"] if r["cells"][0] == "printed")
    assert row["cells"][names.index("Cohort")] == "org"


def test_jsonpath_and_human_duration():
    obj = {"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]},
           "spec": {"items": [{"n": 1}, {"n": 2}]}}
    assert jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status') == ["True"]
    assert jsonpath(obj, ".spec.items[*].n") == [1, 2] and jsonpath(obj, ".spec.items[1].n") == [2]
    assert [human_duration(s) for s in (5, 119, 150, 3600 * 3 + 60, 3600 * 30, 86400 * 3 + 3600)] == \
        ["5s", "119s", "2m30s", "3h1m", "30h", "3d1h"]
