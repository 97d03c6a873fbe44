"""kubectl against the sandbox as against a real API server: create, apply
(client- and server-side, validated by the server), get (tables, printer columns, -o wide), diff, patch (strategic
with merge keys; 415 for custom resources), replace, delete (namespace Terminating then gone), watch with a label
selector, explain, and the installed controllers' admission answers."""

import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from sandbox import Sandbox
from sandbox.tests.requires import unavailable

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: "nginx:IMAGE"}
      - {name: sidecar, image: "busybox:1.36"}
"""


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory, upstream_sandbox):
    binary = shutil.which("kubectl")
    if binary is None:
        unavailable("kubectl is not installed: the kubectl suite was not run")
    config = tmp_path_factory.mktemp("kube") / "config"
    upstream_sandbox.write_kubeconfig(config)

    def run(*args, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([binary, "--kubeconfig", str(config), *args], input=stdin, capture_output=True,
                                text=True, timeout=60)
        if ok and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    return run


def _lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_create_from_a_file_and_get_a_table(kubectl):
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {a: '1'}\n"
    assert kubectl("create", "-f", "-", stdin=manifest).stdout.strip() == "configmap/settings created"
    rows = _lines(kubectl("get", "configmap", "settings").stdout)
    assert rows[0] == ["NAME", "DATA", "AGE"] and rows[1][:2] == ["settings", "1"]
    created = json.loads(kubectl("get", "configmap", "settings", "-o", "json").stdout)
    assert "generation" not in created["metadata"]


def test_create_validates_fields_on_the_server(kubectl):
    # kubectl finds fieldValidation in /openapi/v3 and sends Strict: the server answers the unknown field.
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo, namespace: default}\ndatta: {a: '1'}\n"
    result = kubectl("create", "-f", "-", stdin=manifest, ok=False)
    assert result.returncode != 0
    assert 'strict decoding error: unknown field "datta"' in result.stderr


def test_client_side_apply_and_diff_keep_both_containers(kubectl):
    kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("IMAGE", "1.27"))
    changed = DEPLOYMENT.replace("IMAGE", "1.28")
    diff = kubectl("diff", "-f", "-", stdin=changed, ok=False)
    assert diff.returncode == 1 and "-      - image: nginx:1.27" in diff.stdout and "+      - image: nginx:1.28" \
        in diff.stdout
    kubectl("apply", "-f", "-", stdin=changed)
    images = kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[*].image}").stdout
    assert images == "nginx:1.28 busybox:1.36"
    rows = _lines(kubectl("get", "deployment", "web", "-o", "wide").stdout)
    assert rows[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert rows[1][5:] == ["app,sidecar", "nginx:1.28,busybox:1.36", "app=web"]


def test_strategic_patch_merges_containers_by_name(kubectl):
    kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("IMAGE", "1.27").replace("name: web", "name: patched"))
    kubectl("patch", "deployment", "patched", "-p",
            json.dumps({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "busybox:2"}]}}}}))
    images = kubectl("get", "deployment", "patched", "-o", "jsonpath={.spec.template.spec.containers[*].image}")
    assert images.stdout == "nginx:1.27 busybox:2"


def test_strategic_patch_on_a_custom_resource_is_unsupported(kubectl):
    result = kubectl("patch", "queues.scheduling.volcano.sh", "default", "--type", "strategic", "-p",
                     '{"spec": {"weight": 2}}', ok=False)
    assert result.returncode != 0
    assert "application/strategic-merge-patch+json is not supported" in result.stderr
    kubectl("patch", "queues.scheduling.volcano.sh", "default", "--type", "merge", "-p", '{"spec": {"weight": 2}}')


def test_server_side_apply_and_replace(kubectl):
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa, namespace: default}\ndata: {a: '1'}\n"
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", "-", stdin=manifest).stdout
    live = json.loads(kubectl("get", "configmap", "ssa", "-o", "json", "--show-managed-fields").stdout)
    assert live["metadata"]["managedFields"][0]["manager"] == "kubectl"
    live["data"]["a"] = "2"
    kubectl("replace", "-f", "-", stdin=json.dumps(live))
    assert kubectl("get", "configmap", "ssa", "-o", "jsonpath={.data.a}").stdout == "2"


def test_custom_resources_print_their_columns(kubectl):
    queue = ("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: research}\n"
             "spec: {parent: root}\n")
    kubectl("create", "-f", "-", stdin=queue)
    rows = _lines(kubectl("get", "queues.scheduling.volcano.sh", "research").stdout)
    assert rows == [["NAME", "PARENT"], ["research", "root"]]


def test_webhook_denials_reach_kubectl(kubectl):
    job = ("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: greedy, namespace: default}\n"
           "spec:\n  minAvailable: 3\n  tasks:\n  - name: task-1\n    replicas: 2\n    template:\n      spec:\n"
           "        restartPolicy: Never\n        containers: [{name: c, image: 'busybox:1.36'}]\n")
    result = kubectl("create", "-f", "-", stdin=job, ok=False)
    assert 'admission webhook "validatejob.volcano.sh" denied the request: job \'minAvailable\' should not be ' \
           "greater than total replicas in tasks;" in result.stderr


def test_deleting_a_namespace_waits_for_its_contents(kubectl, upstream_sandbox):
    store = upstream_sandbox.store
    kubectl("create", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: doomed}\n")
    kubectl("create", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: doomed, "
                                       "finalizers: [example.com/hold]}\n")
    kubectl("delete", "namespace", "doomed", "--wait=false")
    assert _lines(kubectl("get", "namespace", "doomed").stdout)[1][:2] == ["doomed", "Terminating"]
    kubectl("patch", "configmap", "held", "-n", "doomed", "--type", "merge", "-p", '{"metadata": {"finalizers": null}}')
    assert kubectl("get", "namespace", "doomed", ok=False).returncode == 1
    assert store._stored(store.kind("v1", "Namespace"), None, "doomed") is None


def test_watch_with_a_selector_sees_objects_enter_and_leave(kubectl):
    kubectl("create", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: watched, namespace: "
                                       "default}\n")
    output = []

    def watch():
        output.append(kubectl("get", "configmap", "-w", "-l", "team=a", "--output-watch-events",
                              "--request-timeout=4s", ok=False).stdout)

    thread = threading.Thread(target=watch)
    thread.start()
    time.sleep(1.5)
    kubectl("label", "configmap", "watched", "team=a")
    time.sleep(0.5)
    kubectl("label", "configmap", "watched", "team=b", "--overwrite")
    thread.join()
    events = [row[:2] for row in _lines(output[0])[1:]]
    assert events == [["ADDED", "watched"], ["DELETED", "watched"]]


def test_explain_built_in_and_custom_fields(kubectl):
    pods = kubectl("explain", "pods.spec.containers.name").stdout
    assert "FIELD: name <string>" in pods and "Name of the container specified as a DNS_LABEL" in pods
    queues = kubectl("explain", "clusterqueues.spec.cohortName").stdout
    assert "GROUP:      kueue.x-k8s.io" in queues and "cohortName that this ClusterQueue belongs to" in queues


def test_imperative_create_sends_protobuf(kubectl):
    # `kubectl create namespace|configmap|secret|quota|priorityclass|serviceaccount` send protobuf bodies.
    assert kubectl("create", "namespace", "imperative").stdout.strip() == "namespace/imperative created"
    kubectl("create", "configmap", "literal", "-n", "imperative", "--from-literal=k=v")
    kubectl("create", "secret", "generic", "token", "-n", "imperative", "--from-literal=a=b")
    kubectl("create", "quota", "caps", "-n", "imperative", "--hard=pods=3,requests.nvidia.com/gpu=2")
    kubectl("create", "priorityclass", "urgent", "--value=1000", "--preemption-policy=Never")
    assert kubectl("get", "configmap", "literal", "-n", "imperative", "-o", "jsonpath={.data.k}").stdout == "v"
    assert kubectl("get", "secret", "token", "-n", "imperative", "-o", "jsonpath={.data.a}").stdout == "Yg=="
    hard = json.loads(kubectl("get", "quota", "caps", "-n", "imperative", "-o", "jsonpath={.status.hard}").stdout)
    assert hard == {"pods": "3", "requests.nvidia.com/gpu": "2"}
    assert _lines(kubectl("get", "priorityclass", "urgent").stdout)[1][:3] == ["urgent", "1000", "false"]
    kubectl("create", "deployment", "web", "-n", "imperative", "--image=nginx:1.27", "--replicas=2", "--port=80")
    deployment = json.loads(kubectl("get", "deployment", "web", "-n", "imperative", "-o", "json").stdout)
    assert deployment["spec"]["replicas"] == 2 and deployment["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["ports"]) == ("nginx:1.27", [{"containerPort": 80, "protocol": "TCP"}])
    kubectl("create", "service", "clusterip", "web", "-n", "imperative", "--tcp=80:8080")
    rows = _lines(kubectl("get", "service", "web", "-n", "imperative").stdout)
    assert rows[1][:2] == ["web", "ClusterIP"] and rows[1][2].startswith("10.96.") and rows[1][4] == "80/TCP"


# Every other `kubectl create <kind>`; what kubectl sends (protobuf) must read back as what it builds
# (its own --dry-run=client JSON of the same command).
IMPERATIVE = [
    ("job", "once", "--image=busybox:1.36", "--", "echo", "hi"),
    ("cronjob", "nightly", "--image=busybox:1.36", "--schedule=*/5 * * * *", "--restart=OnFailure"),
    ("job", "manual", "--from=cronjob/nightly"),
    ("role", "reader", "--verb=get,list", "--resource=pods,configmaps", "--resource-name=a"),
    ("rolebinding", "readers", "--role=reader", "--user=alice", "--serviceaccount=default:bot", "--group=devs"),
    ("clusterrole", "viewer", "--verb=get", "--resource=nodes", "--non-resource-url=/healthz"),
    ("clusterrole", "aggregated", "--aggregation-rule=rbac.example.com/aggregate=true"),
    ("clusterrolebinding", "viewers", "--clusterrole=viewer", "--user=bob"),
    ("poddisruptionbudget", "web", "--selector=app=web", "--min-available=50%"),
    ("poddisruptionbudget", "api", "--selector=app=api", "--max-unavailable=1"),
    ("ingress", "web", "--class=nginx", "--rule=foo.com/bar*=svc:8080,tls=cert", "--rule=/path=other:http",
     "--default-backend=fallback:80"),
]


def _empty(value) -> bool:
    if isinstance(value, dict):
        return all(_empty(v) for k, v in value.items() if k != "creationTimestamp")
    return value in ([], None)


def _within(sent, stored, path=""):
    """Every field kubectl built is stored with the same value (empties, creationTimestamp and the status a create
    resets aside)."""
    if isinstance(sent, dict):
        for key, value in sent.items():
            if key not in ("creationTimestamp", "status") and not _empty(value):
                assert isinstance(stored, dict) and key in stored, f"{path}.{key} missing"
                _within(value, stored[key], f"{path}.{key}")
    elif isinstance(sent, list):
        assert isinstance(stored, list) and len(stored) == len(sent), path
        for index, (a, b) in enumerate(zip(sent, stored, strict=True)):
            _within(a, b, f"{path}[{index}]")
    else:
        assert sent == stored, (path, sent, stored)


@pytest.mark.parametrize("command", IMPERATIVE, ids=[f"{c[0]}-{c[1]}" for c in IMPERATIVE])
def test_every_imperative_create_reads_back_as_kubectl_built_it(kubectl, command):
    kind, name, *flags = command
    scope = [] if kind.startswith("cluster") else ["-n", "protobuf"]
    kubectl("create", "namespace", "protobuf", ok=False)
    built = json.loads(kubectl("create", kind, name, *scope, "--dry-run=client", "-o", "json", *flags).stdout)
    created = kubectl("create", kind, name, *scope, *flags)
    assert created.stdout.strip().endswith(f"/{name} created"), created.stdout
    _within(built, json.loads(kubectl("get", kind, name, *scope, "-o", "json").stdout))


def test_a_protobuf_body_of_a_kind_without_field_numbers_is_refused_not_misread(upstream_sandbox):
    # runtime.Unknown{typeMeta{apiVersion "v1", kind "Pod"}, raw ""}: the sandbox keeps no Pod field numbers.
    type_meta = b"\x0a\x02v1\x12\x03Pod"
    body = b"k8s\x00" + b"\x0a" + bytes([len(type_meta)]) + type_meta + b"\x12\x00"
    request = urllib.request.Request(f"{upstream_sandbox.url}/api/v1/namespaces/default/pods", data=body,
                                     method="POST", headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request)
    assert exc.value.code == 415 and "unknown format" in json.loads(exc.value.read())["message"]


def test_a_fresh_sandbox_serves_openapi_for_every_group_version():
    with Sandbox() as sb:
        index = json.loads(urllib.request.urlopen(f"{sb.url}/openapi/v3").read())
        assert "api/v1" in index["paths"] and "apis/kueue.x-k8s.io/v1beta2" in index["paths"]
        doc = json.loads(urllib.request.urlopen(sb.url + index["paths"]["api/v1"]["serverRelativeURL"]).read())
        patch = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"]
        assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
        assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
        assert "io.k8s.api.core.v1.ConfigMap" in doc["components"]["schemas"]
        v2 = json.loads(urllib.request.urlopen(f"{sb.url}/openapi/v2").read())
        assert v2["swagger"] == "2.0" and "io.k8s.api.core.v1.Pod" in v2["definitions"]
