"""Discovery documents and the DynamicClient, for core kinds and custom kinds."""

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from sandbox import Sandbox
from sandbox.testing import api_client, dynamic_client


def _get(k8s, path):
    response = k8s.call_api(path, "GET", _preload_content=False, _return_http_data_only=True)
    return json.loads(response.data)


def test_discovery_documents(k8s):
    assert _get(k8s, "/api")["versions"] == ["v1"]
    core = _get(k8s, "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["namespaces"]["namespaced"] is False
    assert by_name["pods"]["shortNames"] == ["po"]
    assert by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert "pods/log" in by_name and "resourcequotas/status" in by_name
    groups = {g["name"]: g for g in _get(k8s, "/apis")["groups"]}
    assert groups["kueue.x-k8s.io"]["preferredVersion"] == {"groupVersion": "kueue.x-k8s.io/v1beta2",
                                                            "version": "v1beta2"}
    assert {"apps", "batch", "rbac.authorization.k8s.io", "networking.k8s.io", "scheduling.k8s.io",
            "scheduling.volcano.sh", "batch.volcano.sh", "ray.io"} <= set(groups)
    assert _get(k8s, "/apis/ray.io")["preferredVersion"]["version"] == "v1"
    kueue = {r["name"]: r for r in _get(k8s, "/apis/kueue.x-k8s.io/v1beta2")["resources"]}
    assert kueue["clusterqueues"]["namespaced"] is False and kueue["localqueues"]["namespaced"] is True
    assert "clusterqueues/status" in kueue
    assert _get(k8s, "/version")["gitVersion"].startswith("v1.")


def test_server_health_endpoints(k8s):
    for path in ("/healthz", "/readyz", "/livez"):
        response = k8s.call_api(path, "GET", _preload_content=False, _return_http_data_only=True)
        assert response.data == b"ok"


def test_dynamic_client_core_round_trip(sandbox):
    dyn = dynamic_client(sandbox)
    config_maps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    config_maps.create(body={"metadata": {"name": "a"}, "data": {"x": "1"}}, namespace="default")
    assert config_maps.get(name="a", namespace="default").data.x == "1"
    config_maps.patch(name="a", namespace="default", body={"data": {"x": "2"}},
                      content_type="application/merge-patch+json")
    assert [o.data.x for o in config_maps.get(namespace="default").items] == ["2"]
    config_maps.delete(name="a", namespace="default")
    assert config_maps.get(namespace="default").items == []


def test_dynamic_client_custom_round_trip_and_builtin_kinds(sandbox):
    dyn = dynamic_client(sandbox)
    for api_version, kind in [("kueue.x-k8s.io/v1beta2", "LocalQueue"), ("scheduling.volcano.sh/v1beta1", "Queue"),
                              ("batch.volcano.sh/v1alpha1", "Job"), ("ray.io/v1", "RayJob"),
                              ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass")]:
        assert dyn.resources.get(api_version=api_version, kind=kind).kind == kind
    local = dyn.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="LocalQueue")
    local.create(body={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q"},
                       "spec": {"clusterQueue": "cq", "anything": {"goes": True}}}, namespace="default")
    got = local.get(name="q", namespace="default")
    assert got.spec.clusterQueue == "cq" and got.spec.anything.goes is True


def test_custom_objects_api(k8s):
    custom = client.CustomObjectsApi(k8s)
    created = custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "gpu"},
        "spec": {"weight": 1}})
    assert created["metadata"]["uid"]
    custom.patch_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "gpu", {"spec": {"weight": 2}})
    listed = custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues")
    # Volcano's own root and default queues are there too, as on a cluster with Volcano installed.
    assert [q["metadata"]["name"] for q in listed["items"]] == ["default", "gpu", "root"]
    assert listed["kind"] == "QueueList" and listed["items"][1]["spec"]["weight"] == 2
    assert listed["items"][1]["metadata"]["generation"] == 2


def test_unknown_custom_kind_is_404_without_crd(k8s):
    with pytest.raises(ApiException) as exc:
        client.CustomObjectsApi(k8s).list_cluster_custom_object("example.com", "v1", "widgets")
    assert exc.value.status == 404


def test_no_builtin_kinds_when_crd_dirs_given(tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    with Sandbox(crd_dirs=[tmp_path]) as sb:
        with pytest.raises(ApiException) as exc:
            client.CustomObjectsApi(api_client(sb)).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2",
                                                                                "clusterqueues")
        assert exc.value.status == 404


def test_crd_created_through_the_api_is_served(k8s):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer"}}}}}}}]}}
    client.ApiextensionsV1Api(k8s).create_custom_resource_definition(crd)
    custom = client.CustomObjectsApi(k8s)
    custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}})
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}, "spec": {"size": "big"}})
    assert exc.value.status == 422
