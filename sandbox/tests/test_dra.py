"""Dynamic Resource Allocation and shared GPUs in the simulated cluster: the DRA driver's classes and slices, a
claim per worker pod created from its template, allocated on admission and released at the end, counted against
ResourceQuota and Kueue/Volcano quota and refused in upstream's words; device-plugin shares counted per replica."""

import pytest

from sandbox import Sandbox
from sandbox.errors import ApiError
from sandbox.tests.test_simulator import (
    KUEUE,
    VOLCANO,
    condition,
    create,
    get,
    items,
    kueue_state,
    step,
    workload_of,
)

RESOURCE = "resource.k8s.io/v1"
DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MAPPING = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: gpu.nvidia.com/devices
    deviceClassNames: [gpu.nvidia.com]
"""


@pytest.fixture
def sb():
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5, "dra_nodes": 2,
                                                       "dra_gpus_per_node": 4}) as sandbox:
        create(sandbox, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        yield sandbox


def claim_template(sb, name, count, selector=""):
    exactly = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    create(sb, RESOURCE, "ResourceClaimTemplate", {"metadata": {"name": name, "namespace": "team-a"}, "spec": {
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}})


def pod_template(claims="", shares=0):
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    spec = {"restartPolicy": "Never", "containers": [{"name": "worker", "image": "ghcr.io/acme/train:1",
                                                      "resources": resources}]}
    if claims:
        resources["claims"] = [{"name": "gpus"}]
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": claims}]
    if shares:
        resources["limits"]["nvidia.com/gpu.shared"] = str(shares)
    return {"spec": spec}


def batch_job(sb, name, workers, template):
    return create(sb, "batch/v1", "Job", {
        "metadata": {"name": name, "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"parallelism": workers, "completions": workers, "completionMode": "Indexed", "backoffLimit": 0,
                 "template": template}})


def kueue_queue(sb, resource, flavor, nominal, mapping=True):
    if mapping:
        create(sb, "v1", "Namespace", {"metadata": {"name": "kueue-system"}})
        create(sb, "v1", "ConfigMap", {"metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                                       "data": {"controller_manager_config.yaml": MAPPING}})
    create(sb, KUEUE, "ResourceFlavor", {"metadata": {"name": flavor}, "spec": {}})
    create(sb, KUEUE, "ResourceFlavor", {"metadata": {"name": "cpu"}, "spec": {}})
    cpu = [{"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "100Gi"}]
    create(sb, KUEUE, "ClusterQueue", {"metadata": {"name": "team-a"}, "spec": {"namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "cpu", "resources": cpu}]},
                           {"coveredResources": [resource], "flavors": [{"name": flavor, "resources": [
                               {"name": resource, "nominalQuota": str(nominal)}]}]}]}})
    create(sb, KUEUE, "LocalQueue", {"metadata": {"name": "default", "namespace": "team-a"},
                                     "spec": {"clusterQueue": "team-a"}})


def claims(sb):
    return sorted(items(sb, RESOURCE, "ResourceClaim", "team-a"), key=lambda c: c["metadata"]["name"])


def test_the_driver_publishes_its_classes_and_a_slice_per_node(sb):
    assert {c["metadata"]["name"] for c in items(sb, RESOURCE, "DeviceClass")} == {"gpu.nvidia.com",
                                                                                  "mig.nvidia.com"}
    slices = items(sb, RESOURCE, "ResourceSlice")
    assert [(s["spec"]["nodeName"], len(s["spec"]["devices"])) for s in slices] == [("gpu-node-0", 4),
                                                                                   ("gpu-node-1", 4)]
    assert slices[0]["spec"]["devices"][0]["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}


def test_a_claim_per_worker_is_allocated_on_admission_and_released_at_the_end(sb):
    kueue_queue(sb, "gpu.nvidia.com/devices", "h100-dra", 4)
    claim_template(sb, "train-gpus", 2,
                   "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")
    batch_job(sb, "train", 2, pod_template("train-gpus"))
    step(sb, 1)
    assert kueue_state(sb, "team-a", "train") == "admitted"
    usage = workload_of(sb, "team-a", "train")["status"]["admission"]["podSetAssignments"][0]
    assert usage["flavors"]["gpu.nvidia.com/devices"] == "h100-dra"
    made = claims(sb)
    assert len(made) == 2
    devices = set()
    for claim in made:
        assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpus"}
        assert claim["metadata"]["ownerReferences"][0]["kind"] == "Pod"
        results = claim["status"]["allocation"]["devices"]["results"]
        assert len(results) == 2 and len({r["pool"] for r in results}) == 1  # one node's devices
        devices |= {(r["pool"], r["device"]) for r in results}
        pod = get(sb, "v1", "Pod", "team-a", claim["status"]["reservedFor"][0]["name"])
        assert pod["status"]["resourceClaimStatuses"] == [{"name": "gpus",
                                                           "resourceClaimName": claim["metadata"]["name"]}]
    assert len(devices) == 4
    # A second job finds the queue full: Kueue keeps it pending in its own words.
    batch_job(sb, "more", 1, pod_template("train-gpus"))
    step(sb, 2)
    pending = condition(workload_of(sb, "team-a", "more"), "QuotaReserved")
    assert "insufficient unused quota for gpu.nvidia.com/devices in flavor h100-dra, 2 more needed" in \
        pending["message"]
    step(sb, 10)  # running
    step(sb, 110)  # the first job ends: its claims go, the second is admitted onto the freed devices
    assert kueue_state(sb, "team-a", "more") == "admitted"
    assert [c["status"]["reservedFor"][0]["name"].startswith("more-") for c in claims(sb)] == [True]


def test_a_class_kueue_has_no_mapping_for_is_inadmissible(sb):
    kueue_queue(sb, "gpu.nvidia.com/devices", "h100-dra", 4, mapping=False)
    claim_template(sb, "train-gpus", 1)
    batch_job(sb, "train", 1, pod_template("train-gpus"))
    step(sb, 1)
    reserved = condition(workload_of(sb, "team-a", "train"), "QuotaReserved")
    assert (reserved["reason"], reserved["message"]) == (
        "Inadmissible", "DeviceClass gpu.nvidia.com is not mapped in DRA configuration for podset main")
    assert claims(sb) == []


def test_resource_quota_counts_claimed_devices_and_refuses_what_does_not_fit(sb):
    create(sb, "v1", "ResourceQuota", {"metadata": {"name": "gpu-portal-quota", "namespace": "team-a"},
                                       "spec": {"hard": {DEVICES: "3"}}})
    kueue_queue(sb, "gpu.nvidia.com/devices", "h100-dra", 8)
    claim_template(sb, "train-gpus", 2)
    batch_job(sb, "train", 2, pod_template("train-gpus"))
    step(sb, 1)
    status = get(sb, "batch/v1", "Job", "team-a", "train")["status"]
    failed = condition({"status": status}, "Failed")
    assert "is forbidden: exceeded quota: gpu-portal-quota, requested: " \
           f"{DEVICES}=2, used: {DEVICES}=2, limited: {DEVICES}=3" in failed["message"]
    assert 'resourceclaims.resource.k8s.io "train-' in failed["message"]
    # The job failed: the first worker's claim was released with it, and the quota counts nothing again.
    assert claims(sb) == []
    assert get(sb, "v1", "ResourceQuota", "team-a", "gpu-portal-quota")["status"]["used"] == {DEVICES: "0"}
    with pytest.raises(ApiError) as refused:
        create(sb, RESOURCE, "ResourceClaim", {"metadata": {"name": "by-hand", "namespace": "team-a"}, "spec": {
            "devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                  "allocationMode": "ExactCount", "count": 4}}]}}})
    assert refused.value.code == 403
    assert str(refused.value).endswith(f"exceeded quota: gpu-portal-quota, requested: {DEVICES}=4, used: {DEVICES}=0, "
                                       f"limited: {DEVICES}=3")


def test_shares_are_counted_per_replica(sb):
    create(sb, "v1", "ResourceQuota", {"metadata": {"name": "gpu-portal-quota", "namespace": "team-a"},
                                       "spec": {"hard": {"requests.nvidia.com/gpu.shared": "4"}}})
    kueue_queue(sb, "nvidia.com/gpu.shared", "t4-mps", 4, mapping=False)
    batch_job(sb, "infer", 3, pod_template(shares=1))
    step(sb, 1)
    assert kueue_state(sb, "team-a", "infer") == "admitted"
    assert get(sb, "v1", "ResourceQuota", "team-a", "gpu-portal-quota")["status"]["used"] == {
        "requests.nvidia.com/gpu.shared": "3"}
    batch_job(sb, "more", 2, pod_template(shares=1))
    step(sb, 2)
    assert "insufficient unused quota for nvidia.com/gpu.shared in flavor t4-mps, 1 more needed" in condition(
        workload_of(sb, "team-a", "more"), "QuotaReserved")["message"]


def test_volcano_counts_a_claims_devices_as_deviceclass_resources(sb):
    create(sb, VOLCANO, "Queue", {"metadata": {"name": "team-a"}, "spec": {
        "weight": 1, "reclaimable": True, "capability": {"deviceclass/gpu.nvidia.com": "2"}}})
    claim_template(sb, "train-gpus", 2)
    create(sb, "batch.volcano.sh/v1alpha1", "Job", {"metadata": {"name": "train", "namespace": "team-a"}, "spec": {
        "schedulerName": "volcano", "queue": "team-a", "minAvailable": 2,
        "tasks": [{"name": "worker", "replicas": 2, "template": pod_template("train-gpus")}]}})
    step(sb, 1)
    step(sb, 2)
    assert claims(sb) == []  # not enqueued: 4 devices over a capability of 2
    events = [e["message"] for e in items(sb, "v1", "Event", "team-a")]
    assert any("insufficient deviceclass/gpu.nvidia.com" in m for m in events), events


def test_a_job_created_before_its_claim_template_waits_for_it(sb):
    kueue_queue(sb, "gpu.nvidia.com/devices", "h100-dra", 4)
    batch_job(sb, "train", 1, pod_template("train-gpus"))
    step(sb, 1)
    reserved = condition(workload_of(sb, "team-a", "train"), "QuotaReserved")
    assert reserved["reason"] == "Inadmissible"
    assert 'resourceclaimtemplates "train-gpus" not found' in reserved["message"]
    claim_template(sb, "train-gpus", 2)
    step(sb, 2)
    assert kueue_state(sb, "team-a", "train") == "admitted"
    assert len(claims(sb)) == 1
