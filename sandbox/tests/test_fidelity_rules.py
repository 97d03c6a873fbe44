"""Answers the sandbox gives as kube-apiserver v1.34 gives them, each pinned from the real server's answer in the
fidelity corpus (bench/fidelity): ObjectMeta validation, the kind check of a body, the field manager of a plain
create, the Go shape of built-in objects, and what the registries set on create."""

import json
import urllib.error
import urllib.request

import pytest

NS = "default"
QNAME = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
         "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
         "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def send(sb, method: str, path: str, body=None, content_type: str = "application/json") -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"User-Agent": "Python-urllib/3.11", "Content-Type": content_type}
    request = urllib.request.Request(sb.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def create(sb, path: str, body: dict) -> tuple[int, dict]:
    return send(sb, "POST", path + "?dryRun=All", body)


def causes(status: dict) -> list[tuple]:
    return sorted((c["field"], c["reason"], c["message"]) for c in status["details"]["causes"])


def configmap(**meta) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "valid", **meta}, "data": {"a": "b"}}


CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


def test_label_value_is_validated(sandbox):
    code, status = create(sandbox, CONFIGMAPS, configmap(labels={"app": "-x"}))
    detail = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
              "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
              "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == f'ConfigMap "valid" is invalid: metadata.labels: Invalid value: "-x": {detail}'


def test_annotation_key_and_owner_reference_are_validated(sandbox):
    code, status = create(sandbox, CONFIGMAPS, configmap(annotations={"bad key!": "x"}, ownerReferences=[
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": ""}]))
    assert code == 422
    assert causes(status) == [
        ("metadata.annotations", "FieldValueInvalid", f'Invalid value: "bad key!": {QNAME}'),
        ("metadata.ownerReferences.uid", "FieldValueInvalid", 'Invalid value: "": must not be empty')]


def test_finalizer_without_a_domain_is_refused_on_a_builtin_kind_only(sandbox):
    code, status = create(sandbox, CONFIGMAPS, configmap(finalizers=["nodomain"]))
    assert code == 422
    assert status["message"] == ('ConfigMap "valid" is invalid: metadata.finalizers[0]: Invalid value: "nodomain": '
                                 "name is neither a standard finalizer name nor is it fully qualified")
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": "f", "finalizers": ["nodomain"]}, "spec": {}}
    assert create(sandbox, "/apis/kueue.x-k8s.io/v1beta2/resourceflavors", flavor)[0] == 201


def test_a_finalizer_that_is_not_a_qualified_name_is_reported_twice_in_one_message(sandbox):
    code, status = create(sandbox, CONFIGMAPS, configmap(finalizers=["bad finalizer"]))
    assert code == 422
    assert status["message"] == (
        f'ConfigMap "valid" is invalid: [metadata.finalizers: Invalid value: "bad finalizer": {QNAME}, '
        'metadata.finalizers[0]: Invalid value: "bad finalizer": name is neither a standard finalizer name nor is '
        "it fully qualified]")


def test_namespace_spec_finalizers_are_validated(sandbox):
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "valid"},
                 "spec": {"finalizers": ["bad finalizer"]}}
    code, status = create(sandbox, "/api/v1/namespaces", namespace)
    assert code == 422
    assert causes(status) == [
        ("spec.finalizers", "FieldValueInvalid", 'Invalid value: "bad finalizer": name is neither a standard '
                                                 "finalizer name nor is it fully qualified"),
        ("spec.finalizers", "FieldValueInvalid", f'Invalid value: "bad finalizer": {QNAME}')]


def test_quota_resource_name_gets_both_complaints(sandbox):
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "valid"},
             "spec": {"hard": {"bad resource": "1"}}}
    code, status = create(sandbox, f"/api/v1/namespaces/{NS}/resourcequotas", quota)
    assert code == 422
    assert status["message"] == (
        f'ResourceQuota "valid" is invalid: [spec.hard[bad resource]: Invalid value: "bad resource": {QNAME}, '
        'spec.hard[bad resource]: Invalid value: "bad resource": must be a standard resource for quota]')


def test_a_body_of_another_kind(sandbox):
    code, status = create(sandbox, CONFIGMAPS, {**configmap(), "kind": "Wrong"})
    assert (code, status["message"]) == (400, 'Wrong in version "v1" cannot be handled as a ConfigMap: no kind "Wrong" '
                                              'is registered for version "v1" in scheme "pkg/runtime/scheme.go:110"')
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Wrong", "metadata": {"name": "q"}}
    code, status = create(sandbox, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues", queue)
    assert (code, status["message"]) == (422, 'Wrong.kueue.x-k8s.io "q" is invalid: kind: Invalid value: "Wrong": '
                                              "must be LocalQueue")


def test_a_body_of_another_kind_set_back_by_a_webhook(sandbox):
    # Kueue's ResourceFlavor defaulter answers with the flavor encoded again, its kind ResourceFlavor, before the
    # kind check; the field manager, which could not type the body as sent, records nothing (the answer with Kueue
    # running, bench/FIDELITY_CONTROLLERS.md).
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Wrong", "metadata": {"name": "f"}}
    code, created = create(sandbox, "/apis/kueue.x-k8s.io/v1beta2/resourceflavors", flavor)
    assert code == 201 and created["kind"] == "ResourceFlavor"
    assert "managedFields" not in created["metadata"]


def test_a_create_is_owned_by_the_user_agent_as_an_update(sandbox):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "unknown": 1,
           "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "i"}]}}
    code, created = create(sandbox, f"/api/v1/namespaces/{NS}/pods", pod)
    assert code == 201
    [entry] = created["metadata"]["managedFields"]
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "fieldsType")} == {
        "manager": "Python-urllib", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1"}
    # The Pod's Go type always holds spec.containers: the list itself is no member, its new item is (".").
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
        "f:spec": {"f:containers": {'k:{"name":"main"}': {
            ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {},
            "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
            "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
            "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}
    assert created["metadata"]["generation"] == 1


def test_a_custom_resource_create_owns_its_spec_map_too(sandbox):
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"},
              "spec": {"nodeLabels": {"gpu": "h100"}}}
    code, created = send(sandbox, "POST", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors?fieldManager=me", flavor)
    assert code == 201
    [entry] = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["fieldsV1"]) == ("me", {"f:spec": {".": {}, "f:nodeLabels": {".": {},
                                                                                                  "f:gpu": {}}}})


def test_builtin_objects_have_their_go_shape(sandbox):
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {}}}
    code, created = create(sandbox, f"/api/v1/namespaces/{NS}/resourcequotas", quota)
    assert code == 201 and created["spec"] == {} and created["status"] == {}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
               "spec": {"clusterIP": "None", "ports": [{"name": "rdzv", "port": 29500}]}}
    code, created = create(sandbox, f"/api/v1/namespaces/{NS}/services", service)
    assert created["spec"] == {"clusterIP": "None", "clusterIPs": ["None"], "internalTrafficPolicy": "Cluster",
                               "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "ports": [
                                   {"name": "rdzv", "port": 29500, "protocol": "TCP", "targetPort": 29500}],
                               "sessionAffinity": "None", "type": "ClusterIP"}
    assert created["status"] == {"loadBalancer": {}}


def test_registry_defaults_on_create(sandbox):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "main", "image": "i"}]}}}}
    code, created = create(sandbox, f"/apis/batch/v1/namespaces/{NS}/jobs", job)
    uid = created["metadata"]["uid"]
    generated = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "j",
                 "controller-uid": uid, "job-name": "j"}
    assert created["spec"]["manualSelector"] is False
    assert created["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert created["spec"]["template"]["metadata"]["labels"] == generated == created["metadata"]["labels"]
    limits = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {}, "spec": {"limits": [{"type": "Container"}]}}
    code, created = create(sandbox, f"/api/v1/namespaces/{NS}/limitranges", limits)
    assert code == 201 and len(created["metadata"]["name"]) == 36  # pkg/registry/core/limitrange: a uuid
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"},
                "value": 10}
    assert create(sandbox, "/apis/scheduling.k8s.io/v1/priorityclasses", priority)[1]["preemptionPolicy"] == \
        "PreemptLowerPriority"


@pytest.mark.parametrize("atomic", ["roleRef"])
def test_an_atomic_struct_is_owned_whole_by_an_apply(sandbox, atomic):
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "Group", "name": "ml", "apiGroup": "rbac.authorization.k8s.io"}]}
    code, applied = send(sandbox, "PATCH", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings/b"
                                           "?fieldManager=portal", binding, "application/apply-patch+yaml")
    assert code == 201
    assert applied["metadata"]["managedFields"][0]["fieldsV1"][f"f:{atomic}"] == {}


def test_service_ports_type_and_selector_are_validated(sandbox):
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
               "spec": {"type": "Nope", "ports": [{"port": 0}, {"name": "a", "port": 81, "protocol": "ICMP"}]}}
    code, status = create(sandbox, f"/api/v1/namespaces/{NS}/services", service)
    assert code == 422
    assert causes(status) == sorted([
        ("spec.ports[0].name", "FieldValueRequired", "Required value"),
        ("spec.ports[0].port", "FieldValueInvalid", "Invalid value: 0: must be between 1 and 65535, inclusive"),
        ("spec.ports[0].targetPort", "FieldValueInvalid", "Invalid value: 0: must be between 1 and 65535, inclusive"),
        ("spec.ports[1].protocol", "FieldValueNotSupported",
         'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"'),
        ("spec.type", "FieldValueNotSupported",
         'Unsupported value: "Nope": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"')])


def test_role_binding_defaults_and_rules(sandbox):
    path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings"
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b"},
               "roleRef": {"kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "Group", "name": "ml"}, {"kind": "ServiceAccount", "name": "x"}]}
    code, created = create(sandbox, path, binding)
    assert code == 201  # SetDefaults_RoleBinding / SetDefaults_Subject fill the API groups
    assert created["roleRef"]["apiGroup"] == created["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"
    assert "apiGroup" not in created["subjects"][1]
    binding["subjects"] = [{"kind": "Robot", "name": ""}]
    code, status = create(sandbox, path, binding)
    assert causes(status) == [
        ("subjects[0].kind", "FieldValueNotSupported",
         'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"'),
        ("subjects[0].name", "FieldValueRequired", "Required value")]


def test_job_counts_and_quantities_as_upstream_writes_them(sandbox):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
        "completions": -1, "template": {"spec": {"restartPolicy": "Never", "containers": []}}}}
    code, status = create(sandbox, f"/apis/batch/v1/namespaces/{NS}/jobs", job)
    assert status["message"] == ('Job.batch "j" is invalid: [spec.completions: Invalid value: -1: must be greater '
                                 "than or equal to 0, spec.template.spec.containers: Required value]")
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "1.5", "requests.memory": "1024Gi"}}}
    code, created = create(sandbox, f"/api/v1/namespaces/{NS}/resourcequotas", quota)
    assert created["spec"]["hard"] == {"requests.nvidia.com/gpu": "1500m", "requests.memory": "1Ti"}


def test_limit_range_shows_the_bound_as_upstream_does(sandbox):
    limits = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "3", "nvidia.com/gpu": "2"}, "max": {"cpu": "1"},
         "defaultRequest": {"cpu": "1", "nvidia.com/gpu": "1"}}]}}
    code, status = create(sandbox, f"/api/v1/namespaces/{NS}/limitranges", limits)
    assert causes(status) == sorted([
        ("spec.limits[0].default[cpu]", "FieldValueInvalid",
         'Invalid value: "1": default value 3 is greater than max value 1'),
        ("spec.limits[0].defaultRequest[nvidia.com/gpu]", "FieldValueInvalid",
         'Invalid value: "1": default value 2 must equal to defaultRequest value 1 in nvidia.com/gpu')])


def test_an_apply_neither_claims_managed_fields_nor_owns_an_empty_list(sandbox):
    path = f"/api/v1/namespaces/{NS}/configmaps/c?fieldManager=portal"
    body = {**configmap(name="c", managedFields=[{"manager": "x"}])}
    code, status = send(sandbox, "PATCH", path, body, "application/apply-patch+yaml")
    assert (code, status["message"]) == (400, "metadata.managedFields must be nil")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "main", "image": "i", "env": []}]}}}}
    code, applied = send(sandbox, "PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/j?fieldManager=portal", job,
                         "application/apply-patch+yaml")
    container = applied["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"][
        "f:containers"]['k:{"name":"main"}']
    assert code == 201 and "f:env" not in container and "env" not in applied["spec"]["template"]["spec"][
        "containers"][0]


def test_an_apply_owns_empty_maps_and_map_entries(sandbox):
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {}}}
    code, applied = send(sandbox, "PATCH", f"/api/v1/namespaces/{NS}/resourcequotas/q?fieldManager=portal", quota,
                         "application/apply-patch+yaml")
    assert applied["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {"f:hard": {}}}
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"},
                "globalDefault": False}
    code, created = create(sandbox, "/apis/scheduling.k8s.io/v1/priorityclasses", priority)
    assert "globalDefault" not in created and created["value"] == 0  # plain bool omitted, missing int32 is 0


def test_custom_resource_rules_are_skipped_after_a_blocking_error(upstream_sandbox):
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {}, "spec": {}}
    code, status = create(upstream_sandbox, "/apis/kueue.x-k8s.io/v1beta2/resourceflavors", flavor)
    assert code == 422 and status["message"] == (
        'ResourceFlavor.kueue.x-k8s.io "" is invalid: [metadata.name: Required value: name or generateName is '
        "required, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
        "correct the existing errors to complete validation]")


def test_decoding_errors_of_a_builtin_kind(sandbox):
    code, status = create(sandbox, CONFIGMAPS, {**configmap(), "binaryData": {"a": "not-base64!"}})
    assert (code, status["message"]) == (400, 'ConfigMap in version "v1" cannot be handled as a ConfigMap: illegal '
                                              "base64 data at input byte 3")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"restartPolicy": "Never",
           "containers": [{"name": "main", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]}}
    code, status = create(sandbox, f"/api/v1/namespaces/{NS}/pods", pod)
    assert status["message"].startswith(
        'Pod "p" is invalid: [spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an '
        "integer")


def test_a_custom_resource_list_below_its_min_items(upstream_sandbox):
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
                "spec": {"levels": []}}
    code, status = create(upstream_sandbox, "/apis/kueue.x-k8s.io/v1beta2/topologies", topology)
    assert code == 422
    assert ("spec.levels", "FieldValueInvalid", "Invalid value: 0: spec.levels in body should have at least 1 items") \
        in causes(status)


def test_a_create_in_a_terminating_namespace_names_its_cause(sandbox):
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "leaving", "finalizers": ["example.com/hold"]}}
    assert send(sandbox, "POST", "/api/v1/namespaces", namespace)[0] == 201
    assert send(sandbox, "DELETE", "/api/v1/namespaces/leaving")[0] == 200
    code, status = send(sandbox, "POST", "/api/v1/namespaces/leaving/configmaps", configmap())
    assert (code, status["reason"]) == (403, "Forbidden")
    assert status["message"] == ('configmaps "valid" is forbidden: unable to create new content in namespace leaving '
                                 "because it is being terminated")
    assert causes(status) == [("metadata.namespace", "NamespaceTerminating", "namespace leaving is being terminated")]


def test_a_jobs_generated_labels_are_validated_on_its_template_and_copied_after(sandbox):
    jobs = f"/apis/batch/v1/namespaces/{NS}/jobs"
    long = "j" * 70
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": long}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "main", "image": "i"}]}}}}
    code, status = create(sandbox, jobs, body)
    assert code == 422
    assert causes(status) == [("spec.template.labels", "FieldValueInvalid",
                               f'Invalid value: "{long}": must be no more than 63 characters')] * 2
    code, created = create(sandbox, jobs, {**body, "metadata": {"name": "short"}})
    assert code == 201 and created["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "short"


def test_device_requests_are_validated_and_a_count_of_0_is_unset(sandbox):
    templates = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaimtemplates"

    def template(**exactly):
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}

    code, status = create(sandbox, templates, template(allocationMode="Some", deviceClassName="gpu.nvidia.com"))
    assert (code, causes(status)) == (422, [("spec.spec.devices.requests[0].exactly.allocationMode",
                                             "FieldValueNotSupported",
                                             'Unsupported value: "Some": supported values: "All", "ExactCount"')])
    code, status = create(sandbox, templates, template(count=1))
    assert causes(status) == [("spec.spec.devices.requests[0].exactly.deviceClassName", "FieldValueRequired",
                               "Required value")]
    code, created = create(sandbox, templates, template(deviceClassName="gpu.nvidia.com", count=0))
    assert created["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
