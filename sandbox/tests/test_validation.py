"""422 Invalid (and strict 400) answers for core and custom kinds, and the in-process `validate` function."""

import json
import re

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from sandbox import Sandbox
from sandbox.quantity import parse_quantity
from sandbox.testing import api_client
from sandbox.validation import Validator, validate


def _status(exc) -> dict:
    return json.loads(exc.value.body)


def _pod(name="p", resources=None, **spec):
    container = {"name": "c", "image": "i", **({"resources": resources} if resources else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container], **spec}}


def test_bad_names_are_invalid(k8s):
    core = client.CoreV1Api(k8s)
    with pytest.raises(ApiException) as exc:
        core.create_namespace({"metadata": {"name": "Team_A"}})
    assert exc.value.status == 422
    body = _status(exc)
    assert body["reason"] == "Invalid"
    assert body["message"].startswith('Namespace "Team_A" is invalid: metadata.name: Invalid value: "Team_A": '
                                      "a lowercase RFC 1123 label")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    with pytest.raises(ApiException) as exc:
        core.create_namespace({"metadata": {"name": "a" * 64}})
    assert "must be no more than 63 characters" in _status(exc)["message"]
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", {"metadata": {}})
    assert exc.value.status == 422 and "name or generateName is required" in _status(exc)["message"]
    core.create_namespaced_config_map("default", {"metadata": {"name": "dotted.name"}})


def test_wrong_type_and_missing_required_field(k8s):
    core = client.CoreV1Api(k8s)
    with pytest.raises(ApiException) as exc:
        k8s.call_api("/api/v1/namespaces/default/configmaps", "POST",
                     body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": 1}})
    assert exc.value.status == 422
    assert _status(exc)["details"]["causes"][0]["field"] == "data.k"
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {"containers": [{"image": "i"}]}})
    assert exc.value.status == 422
    assert _status(exc)["details"]["causes"][0] == {"reason": "FieldValueRequired", "message": "Required value",
                                                    "field": "spec.containers[0].name"}


def test_bad_quantities(k8s):
    core = client.CoreV1Api(k8s)
    # A built-in kind's quantities are parsed as it is decoded: 400, before any validation (as kube-apiserver 1.34).
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", _pod(resources={"limits": {"cpu": "lots"}}))
    assert exc.value.status == 400 and _status(exc)["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", _pod(resources={"limits": {"nvidia.com/gpu": "0.5"}}))
    assert "must be an integer" in _status(exc)["message"]
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_resource_quota("default", {"metadata": {"name": "q"},
                                                          "spec": {"hard": {"requests.memory": "10Gx"}}})
    assert exc.value.status == 400
    # validateLimitRange compares a LimitRange's quantities but never asks them to be positive.
    core.create_namespaced_limit_range("default", {"metadata": {"name": "l"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "-1"}}]}})
    core.create_namespaced_resource_quota("default", {"metadata": {"name": "q"}, "spec": {"hard": {
        "requests.nvidia.com/gpu": "4", "limits.memory": "64Gi", "cpu": "1500m", "pods": "1e3"}}})


def test_quantity_parser():
    assert parse_quantity("1.5Gi") == 1.5 * 2**30
    assert parse_quantity("500m") == parse_quantity("0.5")
    assert parse_quantity("1e3") == 1000 and parse_quantity(".5k") == 500 and parse_quantity(2) == 2
    for bad in ("", "1.2.3", "Gi", "1 Gi", "1gi", "abc", True):
        with pytest.raises(ValueError):
            parse_quantity(bad)


def test_quantity_parser_agrees_with_the_kubernetes_client_where_the_api_server_accepts():
    from kubernetes.utils import parse_quantity as client_parse

    from sandbox.quantity import QUANTITY_ERROR

    for good in ("0", "16", "+2", "-1", "1.5Gi", "500m", "250n", "3u", ".5k", "2M", "1Ti", "1e3", "2E-2", "1.", 7):
        assert parse_quantity(good) == client_parse(good), good
    # The client takes these; the API server refuses them with its own message.
    for refused in ("1K", "inf", "NaN", " 1", "1_000", True):
        client_parse(refused)
        with pytest.raises(ValueError, match=re.escape(QUANTITY_ERROR)):
            parse_quantity(refused)


def test_unknown_fields_warn_and_are_dropped_unless_strict(k8s):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {}, "bogus": 1}
    data, status, headers = k8s.call_api("/api/v1/namespaces/default/configmaps", "POST", body=body,
                                         _preload_content=False)
    assert status == 201 and "bogus" not in json.loads(data.data)
    assert headers["Warning"] == '299 - "unknown field \\"bogus\\""'
    with pytest.raises(ApiException) as exc:
        k8s.call_api("/api/v1/namespaces/default/configmaps", "POST", body={**body, "metadata": {"name": "b"}},
                     query_params=[("fieldValidation", "Strict")])
    assert exc.value.status == 400 and 'strict decoding error: unknown field "bogus"' in _status(exc)["message"]


def test_builtin_custom_kinds_are_permissive(k8s):
    custom = client.CustomObjectsApi(k8s)
    created = custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"cohort": "old-field-kept"}}, field_validation="Strict")
    assert created["spec"]["cohort"] == "old-field-kept"
    with pytest.raises(ApiException) as exc:
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "Bad"}})
    assert exc.value.status == 422


def test_validate_function_reports_problems():
    assert validate(_pod()) == []
    assert validate(_pod(name="Bad")) and "metadata.name" in validate(_pod(name="Bad"))[0]
    assert validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "i"}], "bogus": True}}) == [
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.bogus"']
    assert validate({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}) == [
        'no matches for kind "Widget" in version "example.com/v1"']
    assert validate({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "namespace": "x"}})


# Against the upstream CRDs -------------------------------------------------------------------------------------

@pytest.fixture
def upstream(crds_dir):
    import os

    return [os.path.join(crds_dir, d) for d in ("kueue", "volcano", "kuberay")]


def _cluster_queue(**spec):
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}], **spec}}


def test_upstream_crd_validation_over_http(upstream):
    with Sandbox(crd_dirs=upstream) as sb:
        custom = client.CustomObjectsApi(api_client(sb))
        args = ("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        with pytest.raises(ApiException) as exc:
            custom.create_cluster_custom_object(*args, _cluster_queue(cohort="team"), field_validation="Strict")
        assert exc.value.status == 400
        assert 'unknown field "spec.cohort"' in _status(exc)["message"]
        # Without Strict the unknown field is pruned, as a real server does.
        pruned = custom.create_cluster_custom_object(*args, _cluster_queue(cohort="team"))
        assert "cohort" not in pruned["spec"] and pruned["spec"]["resourceGroups"]
        with pytest.raises(ApiException) as exc:
            custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
                "spec": {"weight": -1}})  # 0 would be Volcano's mutating webhook's to turn into 1
        assert exc.value.status == 422
        body = _status(exc)
        assert body["message"] == ('Queue.scheduling.volcano.sh "q" is invalid: spec.weight: Invalid value: -1: '
                                   "spec.weight in body should be greater than or equal to 1")
        assert body["details"]["causes"][0]["field"] == "spec.weight"
        with pytest.raises(ApiException) as exc:
            custom.create_cluster_custom_object(*args, _cluster_queue(queueingStrategy="Sometimes"))
        assert "Unsupported value" in _status(exc)["message"]
        # v1beta1 is still served (deprecated), with its own schema.
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", {
            **_cluster_queue(cohort="team"), "apiVersion": "kueue.x-k8s.io/v1beta1", "metadata": {"name": "old"}},
            field_validation="Strict")


def test_upstream_validator_without_http(upstream):
    validator = Validator(crd_dirs=upstream)
    assert validator.validate(_cluster_queue(cohortName="team")) == []
    assert validator.validate(_cluster_queue(cohort="team")) == [
        'ClusterQueue in version "v1beta2" cannot be handled as a ClusterQueue: strict decoding error: '
        'unknown field "spec.cohort"']
    assert validator.validate(_cluster_queue(cohort="team"), strict=False) == []
    rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r", "namespace": "t"},
              "spec": {"entrypoint": "python x.py", "shutdownAfterJobFinishes": "yes"}}
    assert any("shutdownAfterJobFinishes" in p for p in validator.validate(rayjob))
    flavors = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"},
               "spec": {"nodeLabels": {str(i): "x" for i in range(9)}}}
    assert any("nodeLabels" in p for p in validator.validate(flavors))
    duplicated = _cluster_queue()
    duplicated["spec"]["resourceGroups"][0]["flavors"].append(duplicated["spec"]["resourceGroups"][0]["flavors"][0])
    assert any("Duplicate" in p for p in validator.validate(duplicated))
