"""ResourceQuota as a real cluster keeps and enforces it: status from the namespace's pods, pods over quota refused
with the admission plugin's words, LimitRange defaults before quota.

Rules: plugin/pkg/admission/resourcequota/controller.go, pkg/quota/v1/evaluator/core/pods.go,
pkg/controller/resourcequota/resource_quota_controller.go, plugin/pkg/admission/limitranger/admission.go.
"""

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from sandbox.admission.quota import format_quantity
from sandbox.quantity import parse_quantity


def _pod(name, gpus=0, cpu="1", memory="1Gi", phase=None):
    resources = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "trainer:2",
                                                                  "resources": resources}]}}


@pytest.fixture
def core(k8s):
    api = client.CoreV1Api(k8s)
    api.create_namespace({"metadata": {"name": "team-a"}})
    return api


def _quota(core, **hard):
    core.create_namespaced_resource_quota("team-a", {"metadata": {"name": "gpu-quota"}, "spec": {"hard": hard}})


def _status(core):
    return core.read_namespaced_resource_quota("gpu-quota", "team-a").status


def test_status_mirrors_hard_and_counts_pods(core):
    # resource_quota_controller.go: status.hard = spec.hard, status.used from the pods (pods.go usage).
    _quota(core, **{"requests.nvidia.com/gpu": "8", "pods": "10", "requests.cpu": "16", "limits.memory": "64Gi"})
    assert _status(core).used == {"requests.nvidia.com/gpu": "0", "pods": "0", "requests.cpu": "0",
                                  "limits.memory": "0"}
    core.create_namespaced_pod("team-a", _pod("w0", gpus=4, cpu="2", memory="8Gi"))
    core.create_namespaced_pod("team-a", _pod("w1", gpus=2, cpu="500m", memory="512Mi"))
    status = _status(core)
    assert status.hard == {"requests.nvidia.com/gpu": "8", "pods": "10", "requests.cpu": "16",
                           "limits.memory": "64Gi"}
    assert status.used == {"requests.nvidia.com/gpu": "6", "pods": "2", "requests.cpu": "2500m",
                           "limits.memory": "8704Mi"}


def test_finished_and_deleted_pods_free_quota(core):
    # pods.go: Succeeded and Failed pods use nothing; a deleted pod's usage goes with it.
    _quota(core, **{"requests.nvidia.com/gpu": "8"})
    core.create_namespaced_pod("team-a", _pod("done", gpus=4))
    core.create_namespaced_pod("team-a", _pod("gone", gpus=2))
    assert _status(core).used == {"requests.nvidia.com/gpu": "6"}
    core.patch_namespaced_pod_status("done", "team-a", {"status": {"phase": "Succeeded"}})
    core.delete_namespaced_pod("gone", "team-a")
    assert _status(core).used == {"requests.nvidia.com/gpu": "0"}


def test_a_pod_over_quota_is_forbidden(core):
    # resourcequota/controller.go: 403 "exceeded quota: <name>, requested: ..., used: ..., limited: ...".
    _quota(core, **{"requests.nvidia.com/gpu": "8", "pods": "10"})
    core.create_namespaced_pod("team-a", _pod("w0", gpus=6))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("team-a", _pod("w1", gpus=4))
    body = json.loads(exc.value.body)
    assert exc.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('pods "w1" is forbidden: exceeded quota: gpu-quota, requested: '
                               "requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=6, limited: "
                               "requests.nvidia.com/gpu=8")
    assert _status(core).used["requests.nvidia.com/gpu"] == "6"


def test_count_quotas(core):
    # count/<resource>.<group> and the legacy object counts.
    _quota(core, **{"count/jobs.batch": "1", "configmaps": "5"})
    client.BatchV1Api(core.api_client).create_namespaced_job("team-a", {"metadata": {"name": "j"}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i:1"}]}}}})
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "cm"}})
    assert _status(core).used == {"count/jobs.batch": "1", "configmaps": "1"}


def test_tracked_cpu_must_be_stated(core):
    # pods.go Constraints: with limits.cpu tracked, every container states a cpu limit.
    _quota(core, **{"limits.cpu": "8"})
    pod = {"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "main", "image": "trainer:2"}]}}
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("team-a", pod)
    assert json.loads(exc.value.body)["message"] == ('pods "bare" is forbidden: failed quota: gpu-quota: must '
                                                      "specify limits.cpu for: main")


def test_limit_range_defaults_come_before_quota(core):
    # limitranger/admission.go: a container without requests/limits gets the LimitRange's defaults, which the quota
    # then counts.
    core.create_namespaced_limit_range("team-a", {"metadata": {"name": "defaults"}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "250m"}}]}})
    _quota(core, **{"requests.cpu": "4", "limits.cpu": "4"})
    pod = core.create_namespaced_pod("team-a", {"metadata": {"name": "plain"}, "spec": {"containers": [
        {"name": "main", "image": "trainer:2"}]}})
    assert pod.spec.containers[0].resources.requests == {"cpu": "250m"}
    assert pod.spec.containers[0].resources.limits == {"cpu": "1"}
    assert _status(core).used == {"requests.cpu": "250m", "limits.cpu": "1"}


@pytest.mark.parametrize(("value", "like", "text"), [("2.5", "16", "2500m"), ("9126805504", "64Gi", "8704Mi"),
                                                     ("4", "8", "4"), ("0", "64Gi", "0")])
def test_format_quantity(value, like, text):
    assert format_quantity(parse_quantity(value), like) == text
