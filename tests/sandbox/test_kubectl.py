"""kubectl (v1.33, Debian's kubernetes-client) against the sandbox as against a real API server: create, apply
(client- and server-side, validated by the server), get (tables, printer columns, -o wide), diff, patch (strategic
with merge keys; 415 for custom resources), replace, delete (namespace Terminating then gone), watch with a label
selector, explain, and the installed controllers' admission answers."""

import json
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest

from sandbox import Sandbox
from tests.requires import unavailable

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
    # Kinds whose protobuf fields the sandbox does not keep are refused, not misread.
    result = kubectl("create", "deployment", "web", "-n", "imperative", "--image=nginx", ok=False)
    assert result.returncode != 0 and "unknown format" in result.stderr


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
