"""Server-side apply of lists with keys, owned item by item as sigs.k8s.io/structured-merge-diff v4.6.0 does
(fieldpath/element.go, typed/merge.go, merge/update.go): containers by name, ports by containerPort+protocol, env
by name, and a CRD's `x-kubernetes-list-type: map`; through the official client and kubectl --server-side."""

import json

import pytest
from kubernetes.client import ApiException

from sandbox.tests.kubectl import kubectl_for

PATH = "/apis/apps/v1/namespaces/default/deployments/web"


def apply(k8s, body, manager, *, path=PATH, force=False):
    query = [("fieldManager", manager)] + ([("force", "true")] if force else [])
    headers = {"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"}
    response = k8s.call_api(path, "PATCH", query_params=query, body=body, header_params=headers,
                            _preload_content=False, _return_http_data_only=False)
    return json.loads(response[0].data)


def deployment(*containers, full=True):
    spec = {"template": {"spec": {"containers": list(containers)}}}
    if full:
        spec = {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, **spec["template"]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": spec}


def containers_of(obj):
    return {c["name"]: c for c in obj["spec"]["template"]["spec"]["containers"]}


def owned(obj, manager):
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    return entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]


def test_two_managers_each_own_one_container_and_keep_both(k8s):
    apply(k8s, deployment({"name": "app", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}]}), "team")
    both = apply(k8s, deployment({"name": "sidecar", "image": "busybox:1.36"}, full=False), "mesh")
    assert list(containers_of(both)) == ["app", "sidecar"]
    assert set(owned(both, "team")) == {'k:{"name":"app"}'}
    assert owned(both, "mesh") == {'k:{"name":"sidecar"}': {".": {}, "f:image": {}, "f:name": {}}}
    assert owned(both, "team")['k:{"name":"app"}']["f:env"] == {'k:{"name":"A"}': {".": {}, "f:name": {},
                                                                                    "f:value": {}}}
    # The team applies again without its env var: only that item goes; the mesh's container stays.
    again = apply(k8s, deployment({"name": "app", "image": "nginx:1.27"}), "team")
    assert "env" not in containers_of(again)["app"]
    assert list(containers_of(again)) == ["app", "sidecar"]


def test_dropping_an_item_removes_only_that_item(k8s):
    apply(k8s, deployment({"name": "app", "image": "nginx:1.27"}, {"name": "helper", "image": "busybox:1.36"}), "team")
    apply(k8s, deployment({"name": "sidecar", "image": "envoy:1.31"}, full=False), "mesh")
    after = apply(k8s, deployment({"name": "app", "image": "nginx:1.27"}), "team")
    assert list(containers_of(after)) == ["app", "sidecar"]


def test_ports_by_container_port_and_protocol(k8s):
    first = {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}
    apply(k8s, deployment(first), "team")
    extra = {"name": "app", "ports": [{"containerPort": 80, "protocol": "UDP"}, {"containerPort": 9090}]}
    both = apply(k8s, deployment(extra, full=False), "metrics")
    ports = containers_of(both)["app"]["ports"]
    assert [(p["containerPort"], p["protocol"]) for p in ports] == [(80, "TCP"), (80, "UDP"), (9090, "TCP")]
    assert set(owned(both, "team")['k:{"name":"app"}']["f:ports"]) == {'k:{"containerPort":80,"protocol":"TCP"}'}
    assert set(owned(both, "metrics")['k:{"name":"app"}']["f:ports"]) == {
        'k:{"containerPort":80,"protocol":"UDP"}', 'k:{"containerPort":9090,"protocol":"TCP"}'}


def test_a_field_another_manager_owns_conflicts_unless_forced(k8s):
    apply(k8s, deployment({"name": "app", "image": "nginx:1.27"}), "team")
    apply(k8s, deployment({"name": "sidecar", "image": "busybox:1.36"}, full=False), "mesh")
    with pytest.raises(ApiException) as exc:
        apply(k8s, deployment({"name": "app", "image": "nginx:1.28"}, full=False), "mesh")
    assert exc.value.status == 409
    body = json.loads(exc.value.body)
    assert body["message"] == ('Apply failed with 1 conflict: conflict with "team": '
                               '.spec.template.spec.containers[name="app"].image')
    assert body["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "team"',
                                          "field": '.spec.template.spec.containers[name="app"].image'}]
    # The same value in another manager's item is shared, not a conflict; force takes the field over.
    apply(k8s, deployment({"name": "app", "image": "nginx:1.27"}, full=False), "agreeing")
    forced = apply(k8s, deployment({"name": "app", "image": "nginx:1.28"}, full=False), "mesh", force=True)
    assert containers_of(forced)["app"]["image"] == "nginx:1.28"
    assert "f:image" not in owned(forced, "team")['k:{"name":"app"}']
    assert "f:image" in owned(forced, "mesh")['k:{"name":"app"}']


def test_several_conflicts_are_listed_under_their_manager(k8s):
    apply(k8s, deployment({"name": "app", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}]}), "team")
    with pytest.raises(ApiException) as exc:
        apply(k8s, deployment({"name": "app", "image": "nginx:1.28", "env": [{"name": "A", "value": "2"}]},
                              full=False), "mesh")
    assert json.loads(exc.value.body)["message"] == (
        'Apply failed with 2 conflicts: conflicts with "team":\n'
        '- .spec.template.spec.containers[name="app"].env[name="A"].value\n'
        '- .spec.template.spec.containers[name="app"].image')


def test_a_custom_kind_list_map_is_owned_per_item(upstream_sandbox):
    from sandbox.testing import api_client

    k8s = api_client(upstream_sandbox, retries=0)
    path = "/apis/ray.io/v1/namespaces/default/rayclusters/rc"

    def cluster(*containers, head_params=True):
        head = {"template": {"spec": {"containers": list(containers)}}}
        if head_params:
            head["rayStartParams"] = {}
        return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
                "spec": {"headGroupSpec": head}}

    try:
        apply(k8s, cluster({"name": "ray-head", "image": "rayproject/ray:2.46.0"}), "team", path=path)
        both = apply(k8s, cluster({"name": "log", "image": "fluent-bit:3"}, head_params=False), "logs", path=path)
        names = [c["name"] for c in both["spec"]["headGroupSpec"]["template"]["spec"]["containers"]]
        assert names == ["ray-head", "log"]
        again = apply(k8s, cluster({"name": "ray-head", "image": "rayproject/ray:2.46.0"}), "team", path=path)
        assert [c["name"] for c in again["spec"]["headGroupSpec"]["template"]["spec"]["containers"]] == names
    finally:
        k8s.close()


@pytest.fixture
def kubectl(tmp_path, sandbox):
    return kubectl_for(sandbox, tmp_path)


def manifest(*containers):
    lines = ["apiVersion: apps/v1", "kind: Deployment", "metadata: {name: web, namespace: default}", "spec:",
             "  replicas: 1", "  selector: {matchLabels: {app: web}}", "  template:",
             "    metadata: {labels: {app: web}}", "    spec:", "      containers:"]
    return "\n".join(lines + [f"      - {{name: {name}, image: '{image}'}}" for name, image in containers]) + "\n"


def test_kubectl_server_side_apply_by_two_field_managers(kubectl, sandbox):
    ran = kubectl("apply", "--server-side", "--field-manager=team", "-f", "-", stdin=manifest(("app", "nginx:1.27")))
    assert ran.returncode == 0, ran.stderr
    ran = kubectl("apply", "--server-side", "--field-manager=mesh", "-f", "-",
                  stdin=manifest(("app", "nginx:1.27"), ("sidecar", "busybox:1.36")))
    assert ran.returncode == 0, ran.stderr
    conflict = kubectl("apply", "--server-side", "--field-manager=mesh", "-f", "-",
                       stdin=manifest(("app", "nginx:1.28"), ("sidecar", "busybox:1.36")))
    assert conflict.returncode != 0
    assert 'conflict with "team": .spec.template.spec.containers[name="app"].image' in conflict.stderr
    ran = kubectl("apply", "--server-side", "--field-manager=mesh", "--force-conflicts", "-f", "-",
                  stdin=manifest(("app", "nginx:1.28"), ("sidecar", "busybox:1.36")))
    assert ran.returncode == 0, ran.stderr
    # The team no longer declares the image it lost; its container stays, the mesh's sidecar too.
    ran = kubectl("apply", "--server-side", "--field-manager=team", "-f", "-", stdin=manifest(("app", "nginx:1.28")))
    assert ran.returncode == 0, ran.stderr
    live = json.loads(kubectl("get", "deployment", "web", "-o", "json").stdout)
    assert [(c["name"], c["image"]) for c in live["spec"]["template"]["spec"]["containers"]] == [
        ("app", "nginx:1.28"), ("sidecar", "busybox:1.36")]
