"""What the API server does with a CRD's structural schema: RE2 patterns, defaults before validation, CEL rules.

Fixtures are written for these tests after upstream's sample manifests (Kueue site/static/examples,
KubeRay v1.7.0 ray-operator/config/samples); the rules are the upstream CRDs' own.
"""

import pytest

from sandbox.errors import ApiError
from sandbox.structural import apply_defaults, cel_causes, re2_search


@pytest.fixture(scope="module")
def store(upstream_sandbox):
    upstream_sandbox.store.create(upstream_sandbox.store.kind("v1", "Namespace"), {"metadata": {"name": "team-a"}})
    return upstream_sandbox.store


def _create(store, obj, namespace=None, **kw):
    rt = store.kind(obj["apiVersion"], obj["kind"])
    return store.create(rt, obj, namespace if rt.namespaced else None, version=obj["apiVersion"].split("/")[1], **kw)


def _refused(store, obj, namespace=None) -> ApiError:
    with pytest.raises(ApiError) as exc:
        _create(store, obj, namespace)
    return exc.value


def test_re2_patterns_keep_go_meaning():
    # Python's re refuses a global flag after `^`; Go's RE2 takes it (Kueue AdmissionCheck's controllerName-style
    # patterns are written so).
    assert re2_search(r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$", "Provisioning")
    assert not re2_search(r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$", "-x")


def test_admission_check_with_a_flagged_pattern_is_created(store):
    # kueue.x-k8s.io_admissionchecks.yaml: parameters.kind matches `^(?i)[a-z]...`; this was a 500 under Python's re.
    check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "prov"},
             "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                      "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                     "name": "prov-config"}}}
    assert _create(store, check, dry_run=True)["spec"]["parameters"]["kind"] == "ProvisioningRequestConfig"
    bad = {**check, "spec": {**check["spec"], "parameters": {**check["spec"]["parameters"], "kind": "-bad"}}}
    error = _refused(store, bad)
    assert error.code == 422 and "spec.parameters.kind in body should match" in error.message


def test_schema_defaults_are_applied_before_validation(store):
    # KubeRay's interactive-mode sample: no entrypoint and container ports without `protocol`, which the RayJob
    # schema defaults (the port list's map key is containerPort + protocol).
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "interactive"},
           "spec": {"submissionMode": "InteractiveMode", "jobId": "",
                    "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                        {"name": "ray-head", "image": "rayproject/ray:2.52.0",
                         "ports": [{"containerPort": 6379, "name": "gcs-server"},
                                   {"containerPort": 8265, "name": "dashboard"}]}]}}}}}}
    created = _create(store, job, "team-a", dry_run=True)
    ports = created["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"]
    assert [p["protocol"] for p in ports] == ["TCP", "TCP"]


def test_defaulting_drops_nulls_of_non_nullable_fields_then_defaults():
    schema = {"type": "object", "properties": {"mode": {"type": "string", "default": "Auto"},
                                               "n": {"type": "integer"},
                                               "items": {"type": "array", "items": {
                                                   "type": "object", "properties": {"p": {"default": "TCP"}}}}}}
    obj = {"mode": None, "n": None, "items": [{}, {"p": "UDP"}]}
    apply_defaults(schema, obj)
    assert obj == {"mode": "Auto", "items": [{"p": "TCP"}, {"p": "UDP"}]}


def test_cel_rule_refuses_borrowing_limit_without_cohort(store):
    # kueue.x-k8s.io_clusterqueues.yaml spec rule: "borrowingLimit must be nil when cohort is empty".
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "solo"},
             "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                 {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8,
                                                 "borrowingLimit": 4}]}]}]}}
    error = _refused(store, queue)
    assert error.code == 422
    assert error.details["causes"] == [{"reason": "FieldValueInvalid", "field": "spec", "message":
                                        'Invalid value: "object": borrowingLimit must be nil when cohort is empty'}]
    queue["spec"]["cohortName"] = "org"
    _create(store, queue, dry_run=True)


def test_cel_transition_rule_makes_local_queue_cluster_queue_immutable(store):
    # kueue.x-k8s.io_localqueues.yaml: spec.clusterQueue has `self == oldSelf`, "field is immutable".
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"},
             "spec": {"clusterQueue": "cq-a"}}
    created = _create(store, local, "team-a")
    assert created["spec"]["stopPolicy"] == "None"  # a schema default
    rt = store.kind("kueue.x-k8s.io/v1beta2", "LocalQueue")
    with pytest.raises(ApiError) as exc:
        store.patch(rt, "team-a", "lq", {"spec": {"clusterQueue": "cq-b"}}, "merge")
    assert exc.value.code == 422
    assert 'spec.clusterQueue: Invalid value: "string": field is immutable' in exc.value.message
    store.patch(rt, "team-a", "lq", {"spec": {"stopPolicy": "Hold"}}, "merge")


def test_cel_list_rules_on_resource_flavor_tolerations(store):
    # kueue.x-k8s.io_resourceflavors.yaml tolerations: an operator outside Equal/Exists is refused.
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "spot"},
              "spec": {"tolerations": [{"key": "spot", "operator": "Maybe", "effect": "NoSchedule"}]}}
    error = _refused(store, flavor)
    assert error.code == 422 and "spec.tolerations" in error.message


def test_cel_causes_report_the_rule_when_it_has_no_message():
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.a <= self.b"}],
              "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    assert cel_causes(schema, {"a": 1, "b": 2}) == []
    assert cel_causes(schema, {"a": 3, "b": 2}, path=".spec") == [
        {"reason": "FieldValueInvalid", "field": "spec", "message": 'Invalid value: "object": failed rule: '
                                                                   "self.a <= self.b"}]
    forbidden = {"type": "object", "x-kubernetes-validations": [
        {"rule": "!has(self.x)", "message": "x is not allowed", "reason": "FieldValueForbidden", "fieldPath": ".x"}]}
    assert cel_causes(forbidden, {"x": 1}, path=".spec") == [
        {"reason": "FieldValueForbidden", "field": "spec.x", "message": "Forbidden: x is not allowed"}]
