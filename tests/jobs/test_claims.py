"""A DRA flavor's job asks for devices through a ResourceClaimTemplate, never an extended resource; a shared flavor
asks for the resource the device plugin advertises. Every object passes the Kubernetes 1.34 schema strictly
(kubernetes-validate, resource.k8s.io/v1 included) or the upstream CRD, plus the rules the API server applies
beyond the schema (kubernetes v1.34 pkg/apis/core/validation/validation.go: a container's `resources.claims[].name`
must name an entry of the pod's `resourceClaims`, each a DNS label; pkg/apis/resource/validation/validation.go:
a request name is a DNS label, `count` is positive under ExactCount, a device class name a DNS subdomain).
"""

import itertools

import kubernetes_validate
import pytest

from backends.kueue_manifests import cluster_queue_manifest
from backends.specs import FlavorSpec, QuotaSpec, TeamQuotaSpec
from backends.volcano_manifests import volcano_queue_manifest
from jobs.claims import CLAIM, claim_template_name
from jobs.manifests import job_manifests
from portal.naming import is_dns1123_label
from quotas.manifests import limit_range_manifest, resource_quota_manifest
from tenants.sharing import LOGICAL_RESOURCE
from tests.jobs.test_manifests import spec
from tests.kueue_queues import flavor_quota

KUBERNETES = "1.34.0"
KINDS = list(itertools.product(["pytorch", "ray", "batch"], ["kueue", "volcano"]))
SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


@pytest.fixture
def validator(crds_dir):
    from sandbox.validation import Validator

    return Validator(crd_dirs=[crds_dir])


def _pod_templates(obj: dict):
    """Every pod template in a job object, wherever its kind keeps them."""
    spec = obj.get("spec") or {}
    if "template" in spec:
        yield spec["template"]
    for task in spec.get("tasks") or []:
        yield task["template"]
    cluster = spec.get("rayClusterSpec")
    if cluster:
        yield cluster["headGroupSpec"]["template"]
        for group in cluster["workerGroupSpecs"]:
            yield group["template"]


def _valid(obj, validator):
    assert validator.validate(obj, strict=True) == [], obj["kind"]
    if "." not in obj["apiVersion"].split("/")[0] or obj["apiVersion"] in ("v1", "resource.k8s.io/v1"):
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)


@pytest.mark.parametrize(("kind", "scheduler"), KINDS)
def test_a_dra_job_claims_devices_per_worker(kind, scheduler, validator):
    objects = job_manifests(spec(kind=kind, scheduler=scheduler, gpus_per_worker=4, node_labels={},
                                 device_class="gpu.nvidia.com", device_selector=SELECTOR))
    template = objects[0]
    assert template["kind"] == "ResourceClaimTemplate"
    assert template["metadata"]["name"] == claim_template_name("train-42") == "train-42-gpus"
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request == {"name": CLAIM, "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                                                 "count": 4, "selectors": [{"cel": {"expression": SELECTOR}}]}}
    assert is_dns1123_label(request["name"])
    claimed = 0
    for obj in objects:
        _valid(obj, validator)
        for pod in _pod_templates(obj):
            names = {c["name"] for c in pod["spec"].get("resourceClaims", [])}
            for container in pod["spec"]["containers"]:
                resources = container["resources"]
                assert not any(k.startswith("nvidia.com/") for k in resources["limits"]), resources
                assert {c["name"] for c in resources.get("claims", [])} <= names
                claimed += bool(resources.get("claims"))
            if names:
                assert pod["spec"]["resourceClaims"] == [{"name": CLAIM,
                                                          "resourceClaimTemplateName": "train-42-gpus"}]
    assert claimed >= 1  # a Ray head has no GPU and no claim; every GPU worker has one


@pytest.mark.parametrize(("kind", "scheduler"), KINDS)
def test_a_shared_job_asks_for_the_plugins_shared_resource(kind, scheduler, validator):
    objects = job_manifests(spec(kind=kind, scheduler=scheduler, gpus_per_worker=1,
                                 gpu_resource="nvidia.com/gpu.shared"))
    assert all(obj["kind"] != "ResourceClaimTemplate" for obj in objects)
    limits = [c["resources"]["limits"] for obj in objects for pod in _pod_templates(obj)
              for c in pod["spec"]["containers"]]
    assert {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu.shared": "1"} in limits
    for obj in objects:
        _valid(obj, validator)


DRA = FlavorSpec(name="h100-dra", resource_name="gpu.nvidia.com/devices", gpus_per_node=8,
                 device_class="gpu.nvidia.com")
SHARED = FlavorSpec(name="t4-mps", resource_name="nvidia.com/gpu.shared", gpus_per_node=32)
WHOLE = FlavorSpec(name="h100", resource_name="nvidia.com/gpu", gpus_per_node=8)


def _team(*quotas, held=False):
    return TeamQuotaSpec(slug="nlp", namespace="nlp", quotas=quotas, cluster_flavors=(DRA, SHARED, WHOLE),
                         cohort="gpu-east", held=held)


def test_team_quota_counts_dra_devices_per_class_and_shares_per_replica(validator):
    team = _team(QuotaSpec(DRA, 4, 2, cpu_cores=8, memory_gib=64), QuotaSpec(SHARED, 8, 0))
    quota = resource_quota_manifest(team)
    assert quota["spec"]["hard"] == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "6",
                                     "requests.cpu": "8", "requests.memory": "64Gi",
                                     "requests.nvidia.com/gpu": "0", "requests.nvidia.com/gpu.shared": "8"}
    # A class the team holds nothing of is capped at zero, as an extended resource is.
    assert resource_quota_manifest(_team())["spec"]["hard"]["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] \
        == "0"
    limits = limit_range_manifest(team)["spec"]["limits"][0]["max"]
    assert limits == {"nvidia.com/gpu": "8", "nvidia.com/gpu.shared": "32"}  # a DRA device is no container resource
    queue = cluster_queue_manifest(team)
    (group,) = queue["spec"]["resourceGroups"]  # one group: cpu, memory and the GPU names, the DRA one among them
    assert group["coveredResources"] == ["cpu", "memory", "gpu.nvidia.com/devices", "nvidia.com/gpu.shared"]
    assert flavor_quota(queue, "h100-dra", "gpu.nvidia.com/devices") == {
        "name": "gpu.nvidia.com/devices", "nominalQuota": "4", "borrowingLimit": "2"}
    assert flavor_quota(queue, "h100-dra", "cpu") == {"name": "cpu", "nominalQuota": "8"}
    assert LOGICAL_RESOURCE.match(DRA.resource_name)
    volcano = volcano_queue_manifest(team)["spec"]
    assert volcano["capability"] == {"deviceclass/gpu.nvidia.com": "6", "nvidia.com/gpu.shared": "8", "cpu": "8",
                                     "memory": "64Gi"}
    assert volcano["deserved"]["deviceclass/gpu.nvidia.com"] == "4"
    assert volcano_queue_manifest(_team(held=True))["spec"]["capability"] == {
        "deviceclass/gpu.nvidia.com": "0", "nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "0"}
    for obj in (quota, limit_range_manifest(team), queue, volcano_queue_manifest(team)):
        _valid(obj, validator)
