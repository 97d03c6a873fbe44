"""CRUD semantics through the official client's typed APIs."""

import json
import time

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from sandbox.testing import api_client


@pytest.fixture
def core(k8s):
    return client.CoreV1Api(k8s)


def _status(exc: ApiException) -> dict:
    return json.loads(exc.body)


def _cm(name, labels=None, data=None, **meta):
    return {"metadata": {"name": name, "labels": labels or {}, **meta}, "data": data or {"k": "v"}}


def test_default_namespaces_exist_with_defaulted_label_and_phase(core):
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert names == {"default", "kube-system", "kube-public", "kube-node-lease"}
    ns = core.create_namespace({"metadata": {"name": "team-a"}})
    assert ns.metadata.labels == {"kubernetes.io/metadata.name": "team-a"}
    assert ns.status.phase == "Active"


def test_create_sets_server_fields_and_rv_increases(core):
    first = core.create_namespaced_config_map("default", _cm("a"))
    second = core.create_namespaced_config_map("default", _cm("b"))
    assert first.metadata.uid and first.metadata.uid != second.metadata.uid
    assert first.metadata.generation is None  # a ConfigMap has none (its strategy sets no generation)
    assert first.metadata.creation_timestamp is not None
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    got = core.read_namespaced_config_map("a", "default")
    assert got.data == {"k": "v"} and got.metadata.resource_version == first.metadata.resource_version


def test_generate_name(core):
    obj = core.create_namespaced_config_map("default", {"metadata": {"generateName": "job-"}, "data": {}})
    assert obj.metadata.name.startswith("job-") and len(obj.metadata.name) == len("job-") + 5


def test_already_exists_and_not_found_are_status_bodies(core):
    core.create_namespace({"metadata": {"name": "x"}})
    with pytest.raises(ApiException) as exc:
        core.create_namespace({"metadata": {"name": "x"}})
    assert exc.value.status == 409
    body = _status(exc.value)
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'namespaces "x" already exists', "reason": "AlreadyExists", "code": 409,
                    "details": {"name": "x", "kind": "namespaces"}}
    with pytest.raises(ApiException) as exc:
        core.read_namespace("y")
    assert exc.value.status == 404 and _status(exc.value)["message"] == 'namespaces "y" not found'


def test_create_in_missing_namespace_is_404(core):
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("ghost", _cm("a"))
    assert exc.value.status == 404
    assert _status(exc.value)["message"] == 'namespaces "ghost" not found'


def test_group_qualified_not_found(k8s):
    with pytest.raises(ApiException) as exc:
        client.RbacAuthorizationV1Api(k8s).read_cluster_role("nope")
    assert _status(exc.value)["message"] == 'clusterroles.rbac.authorization.k8s.io "nope" not found'


def test_label_selectors(core):
    core.create_namespaced_config_map("default", _cm("a", {"tier": "gpu", "team": "x"}))
    core.create_namespaced_config_map("default", _cm("b", {"tier": "cpu", "team": "y"}))
    core.create_namespaced_config_map("default", _cm("c", {"team": "z"}))

    def names(selector):
        return sorted(o.metadata.name for o in core.list_namespaced_config_map("default",
                                                                               label_selector=selector).items)

    assert names("tier=gpu") == ["a"]
    assert names("tier==gpu") == ["a"]
    assert names("tier!=gpu") == ["b", "c"]
    assert names("tier in (gpu, cpu)") == ["a", "b"]
    assert names("team notin (x,y)") == ["c"]
    assert names("tier") == ["a", "b"]
    assert names("!tier") == ["c"]
    assert names("tier,team=y") == ["b"]


def test_field_selectors_and_all_namespaces(core):
    core.create_namespace({"metadata": {"name": "other"}})
    core.create_namespaced_config_map("default", _cm("a"))
    core.create_namespaced_config_map("other", _cm("a"))
    core.create_namespaced_config_map("other", _cm("b"))
    everything = core.list_config_map_for_all_namespaces()
    assert [(o.metadata.namespace, o.metadata.name) for o in everything.items] == [
        ("default", "a"), ("other", "a"), ("other", "b")]
    assert everything.metadata.resource_version
    only_a = core.list_config_map_for_all_namespaces(field_selector="metadata.name=a")
    assert len(only_a.items) == 2
    in_other = core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=other,metadata.name!=a")
    assert [o.metadata.name for o in in_other.items] == ["b"]
    active = core.list_namespace(field_selector="status.phase=Active")
    assert "other" in {n.metadata.name for n in active.items}


def test_a_field_selector_names_only_what_the_kind_exports(core):
    """kube-apiserver exports per kind the fields a selector may name (pkg/registry/*/strategy.go
    ToSelectableFields); any other is a 400: "field label not supported" where the kind has its own conversion
    (pods, events...), else apimachinery's DefaultMetaV1FieldSelectorConversion words."""
    core.create_namespaced_event("default", {
        "metadata": {"name": "e1"}, "involvedObject": {"kind": "PodGroup", "name": "pg", "namespace": "default"},
        "reason": "Unschedulable", "message": "m", "type": "Warning", "source": {"component": "volcano"}})
    found = core.list_namespaced_event("default", field_selector="involvedObject.kind=PodGroup,type=Warning,"
                                                                 "source=volcano")
    assert [e.metadata.name for e in found.items] == ["e1"]
    assert core.list_namespaced_pod("default", field_selector="spec.nodeName=n1").items == []
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default", field_selector="spec.priority=5")
    assert (exc.value.status, _status(exc.value)["message"]) == (400, "field label not supported: spec.priority")
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_config_map("default", field_selector="data.k=v")
    assert (exc.value.status, _status(exc.value)["message"]) == (
        400, '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"')


def test_pagination(core):
    for i in range(5):
        core.create_namespaced_config_map("default", _cm(f"cm-{i}"))
    first = core.list_namespaced_config_map("default", limit=2)
    assert [o.metadata.name for o in first.items] == ["cm-0", "cm-1"]
    assert first.metadata.remaining_item_count == 3
    second = core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_config_map("default", limit=2, _continue=second.metadata._continue)
    assert [o.metadata.name for o in second.items + third.items] == ["cm-2", "cm-3", "cm-4"]
    assert third.metadata._continue is None


def test_stale_update_conflicts(core):
    obj = core.create_namespaced_config_map("default", _cm("a"))
    obj.data = {"k": "1"}
    core.replace_namespaced_config_map("a", "default", obj)
    obj.data = {"k": "2"}
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("a", "default", obj)
    assert exc.value.status == 409
    assert _status(exc.value)["message"] == ('Operation cannot be fulfilled on configmaps "a": the object has been '
                                             'modified; please apply your changes to the latest version and try again')
    assert _status(exc.value)["reason"] == "Conflict"


def test_generation_bumps_only_on_spec_change(k8s):
    apps = client.AppsV1Api(k8s)
    dep = {"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                                                  "template": {"metadata": {"labels": {"a": "b"}},
                                                               "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    created = apps.create_namespaced_deployment("default", dep)
    labelled = apps.patch_namespaced_deployment("web", "default", {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    assert int(labelled.metadata.resource_version) > int(created.metadata.resource_version)
    scaled = apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2
    same = apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 3}})
    assert same.metadata.resource_version == scaled.metadata.resource_version and same.metadata.generation == 2


def test_generation_for_kinds_without_spec(k8s):
    # pkg/registry/scheduling/priorityclass/strategy.go sets generation 1 on create only; the value is immutable
    # (pkg/apis/scheduling/validation ValidatePriorityClassUpdate).
    sched = client.SchedulingV1Api(k8s)
    pc = sched.create_priority_class({"metadata": {"name": "high"}, "value": 100})
    assert pc.metadata.generation == 1
    pc = sched.patch_priority_class("high", {"metadata": {"labels": {"a": "b"}}})
    assert pc.metadata.generation == 1
    with pytest.raises(ApiException) as exc:
        sched.patch_priority_class("high", {"value": 200})
    assert exc.value.status == 422 and "value: Forbidden: may not be changed in an update." in exc.value.body


def test_merge_strategic_and_json_patch(core):
    core.create_namespaced_config_map("default", _cm("a", {"x": "1"}, {"k": "v", "drop": "me"}))
    merged = core.api_client.call_api(
        "/api/v1/namespaces/default/configmaps/a", "PATCH", body={"data": {"drop": None, "new": "n"}},
        header_params={"Content-Type": "application/merge-patch+json"}, response_type="V1ConfigMap",
        _return_http_data_only=True)
    assert merged.data == {"k": "v", "new": "n"}
    strategic = core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"y": "2"}}})
    assert strategic.metadata.labels == {"x": "1", "y": "2"}
    patched = core.patch_namespaced_config_map("a", "default", [
        {"op": "add", "path": "/data/added", "value": "1"},
        {"op": "replace", "path": "/data/k", "value": "w"},
        {"op": "remove", "path": "/data/new"},
        {"op": "copy", "from": "/data/k", "path": "/data/copied"},
        {"op": "move", "from": "/data/added", "path": "/data/moved"},
        {"op": "test", "path": "/data/k", "value": "w"},
        {"op": "add", "path": "/metadata/labels/a~1b", "value": "slash"},
    ])
    assert patched.data == {"k": "w", "copied": "w", "moved": "1"}
    assert patched.metadata.labels["a/b"] == "slash"
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_config_map("a", "default", [{"op": "test", "path": "/data/k", "value": "nope"}])
    assert exc.value.status == 422


def test_dry_run_stores_nothing(core):
    created = core.create_namespaced_config_map("default", _cm("a"), dry_run="All")
    assert created.metadata.name == "a"
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("a", "default")
    real = core.create_namespaced_config_map("default", _cm("a"))
    patched = core.patch_namespaced_config_map("a", "default", {"data": {"k": "dry"}}, dry_run="All")
    assert patched.data == {"k": "dry"}
    real.data = {"k": "replaced"}
    core.replace_namespaced_config_map("a", "default", real, dry_run="All")
    core.delete_namespaced_config_map("a", "default", dry_run="All")
    stored = core.read_namespaced_config_map("a", "default")
    assert stored.data == {"k": "v"} and stored.metadata.resource_version == real.metadata.resource_version
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", _cm("a"), dry_run="All")
    assert exc.value.status == 409


def test_finalizers_hold_deletion_until_removed(core):
    core.create_namespaced_config_map("default", _cm("a", finalizers=["example.com/hold"]))
    core.delete_namespaced_config_map("a", "default")
    held = core.read_namespaced_config_map("a", "default")
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    core.patch_namespaced_config_map("a", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("a", "default")
    assert exc.value.status == 404


def test_namespace_delete_cascades(k8s, core):
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", _cm("a"))
    core.create_namespaced_service_account("team", {"metadata": {"name": "sa"}})
    client.RbacAuthorizationV1Api(k8s).create_namespaced_role("team", {"metadata": {"name": "r"}, "rules": []})
    core.create_namespaced_config_map("default", _cm("keep"))
    deleted = core.delete_namespace("team", _preload_content=False)
    assert json.loads(deleted.data)["status"]["phase"] == "Terminating"
    assert core.list_config_map_for_all_namespaces().items[0].metadata.name == "keep"
    assert core.list_service_account_for_all_namespaces().items == []
    assert client.RbacAuthorizationV1Api(k8s).list_role_for_all_namespaces().items == []
    with pytest.raises(ApiException):
        core.read_namespace("team")


def test_delete_collection_with_label_selector(core):
    core.create_namespaced_config_map("default", _cm("a", {"app": "x"}))
    core.create_namespaced_config_map("default", _cm("b", {"app": "x"}))
    core.create_namespaced_config_map("default", _cm("c", {"app": "y"}))
    core.delete_collection_namespaced_config_map("default", label_selector="app=x")
    assert [o.metadata.name for o in core.list_namespaced_config_map("default").items] == ["c"]


def test_status_subresource(core):
    core.create_namespaced_pod("default", {"metadata": {"name": "p"},
                                           "spec": {"containers": [{"name": "c", "image": "i"}]}})
    pod = core.read_namespaced_pod("p", "default")
    assert pod.status.phase == "Pending"
    # Writes to the main resource ignore status...
    core.patch_namespaced_pod("p", "default", {"status": {"phase": "Running"}, "metadata": {"labels": {"a": "b"}}})
    pod = core.read_namespaced_pod("p", "default")
    assert pod.status.phase == "Pending" and pod.metadata.labels == {"a": "b"}
    # ...and /status changes only status.
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"},
                                                      "metadata": {"labels": {"a": "changed"}}})
    pod = core.read_namespaced_pod("p", "default")
    assert pod.status.phase == "Running" and pod.metadata.labels == {"a": "b"}
    pod.status.phase = "Succeeded"
    replaced = core.replace_namespaced_pod_status("p", "default", pod)
    # Pods carry a generation at 1.34 (PodObservedGenerationTracking is beta and on); /status leaves it.
    assert replaced.status.phase == "Succeeded" and replaced.metadata.generation == 1


def test_quota_status_and_batch_job_status(k8s, core):
    core.create_namespaced_resource_quota("default", {"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "4"}}})
    written = core.patch_namespaced_resource_quota_status("q", "default", {"status": {"hard": {"cpu": "4"},
                                                                                      "used": {"cpu": "1"}}})
    assert written.status.used == {"cpu": "1"}
    # A status write stands (the quota controller ignores status-only updates) until the namespace changes.
    assert core.read_namespaced_resource_quota("q", "default").status.used == {"cpu": "1"}
    core.create_namespaced_config_map("default", {"metadata": {"name": "nudge"}})
    assert core.read_namespaced_resource_quota("q", "default").status.used == {"cpu": "0"}
    batch = client.BatchV1Api(k8s)
    batch.create_namespaced_job("default", {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}})
    batch.patch_namespaced_job_status("j", "default", {"status": {"succeeded": 1}})
    assert batch.read_namespaced_job("j", "default").status.succeeded == 1


def test_pod_log(sandbox, core):
    core.create_namespaced_pod("default", {"metadata": {"name": "p"},
                                           "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert core.read_namespaced_pod_log("p", "default") == ""
    sandbox.store.set_log("default", "p", "hello\n")
    sandbox.store.append_log("default", "p", "world\n")
    assert core.read_namespaced_pod_log("p", "default") == "hello\nworld\n"


def test_typed_apis_for_every_core_group(k8s):
    rbac = client.RbacAuthorizationV1Api(k8s)
    rbac.create_cluster_role({"metadata": {"name": "system:gpu-user"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": "b"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:gpu-user"},
        "subjects": [{"kind": "Group", "name": "g", "apiGroup": "rbac.authorization.k8s.io"}]})
    rbac.create_namespaced_role_binding("default", {"metadata": {"name": "rb"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:gpu-user"}})
    client.NetworkingV1Api(k8s).create_namespaced_network_policy("default", {
        "metadata": {"name": "deny"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}})
    core = client.CoreV1Api(k8s)
    core.create_namespaced_limit_range("default", {"metadata": {"name": "l"}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "500m"}}]}})
    core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "stringData": {"token": "abc"}})
    assert core.read_namespaced_secret("s", "default").data == {"token": "YWJj"}
    core.create_namespaced_service("default", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}})
    core.create_node({"metadata": {"name": "gpu-node-1"}})
    core.create_namespaced_event("default", {"metadata": {"name": "e"}, "involvedObject": {"name": "x"}})
    assert rbac.read_cluster_role_binding("b").role_ref.name == "system:gpu-user"


def test_state_file_saves_after_changes_debounced(tmp_path):
    from sandbox import Sandbox

    state = tmp_path / "state.json"
    with Sandbox(state_file=state) as sb:
        client.CoreV1Api(api_client(sb)).create_namespace({"metadata": {"name": "kept"}})
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and (not state.exists() or "kept" not in state.read_text()):
            time.sleep(0.05)
        assert "kept" in state.read_text()
    with Sandbox(state_file=state) as sb:
        assert client.CoreV1Api(api_client(sb)).read_namespace("kept").status.phase == "Active"


def test_kubeconfig_is_accepted_by_the_official_loader(sandbox, tmp_path):
    from kubernetes import config

    path = tmp_path / "kubeconfig"
    sandbox.write_kubeconfig(path, context="demo")
    assert sandbox.kubeconfig()["clusters"][0]["cluster"]["server"] == sandbox.url
    configuration = client.Configuration()
    config.load_kube_config(str(path), context="demo", client_configuration=configuration)
    assert configuration.host == sandbox.url
    assert client.CoreV1Api(client.ApiClient(configuration)).read_namespace("default").metadata.name == "default"


def test_in_process_store_api_and_subscribe(sandbox, core):
    store = sandbox.store
    seen = []
    unsubscribe = store.subscribe(lambda event, rt, obj: seen.append((event, rt.kind, obj["metadata"]["name"])))
    pods = store.kind("v1", "Pod")
    store.create(pods, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
                 "default")
    store.patch(pods, "default", "p", {"status": {"phase": "Running"}}, "merge", subresource="status")
    assert core.read_namespaced_pod("p", "default").status.phase == "Running"
    store.delete(pods, "default", "p")
    unsubscribe()
    assert seen == [("ADDED", "Pod", "p"), ("MODIFIED", "Pod", "p"), ("DELETED", "Pod", "p")]
