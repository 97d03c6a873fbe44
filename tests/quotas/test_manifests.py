import pytest

from backends.kueue_manifests import (
    cluster_queue_manifest,
    cohort_manifest,
    local_queue_manifest,
    resource_flavor_manifest,
    workload_priority_class_manifest,
)
from backends.specs import FlavorSpec, QuotaSpec, TeamQuotaSpec, gib
from backends.volcano_manifests import volcano_department_queue_manifest, volcano_queue_manifest
from quotas.manifests import limit_range_manifest, resource_quota_manifest

LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "nlp"}
CLUSTER_LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/scope": "cluster"}
H100 = FlavorSpec(name="h100", resource_name="nvidia.com/gpu", gpus_per_node=8,
                  node_labels={"nvidia.com/gpu.product": "H100"},
                  tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
L40S = FlavorSpec(name="l40s", resource_name="nvidia.com/gpu", gpus_per_node=4)
MIG = FlavorSpec(name="a100-mig-1g", resource_name="nvidia.com/mig-1g.10gb", gpus_per_node=56)
ALL = (H100, L40S, MIG)


def team(*quotas, cohort="gpu-east", held=False):
    return TeamQuotaSpec(slug="nlp", namespace="nlp", quotas=tuple(quotas), cluster_flavors=ALL, cohort=cohort,
                         held=held)


@pytest.mark.parametrize(
    ("spec", "hard"),
    [
        (team(), {"requests.nvidia.com/gpu": "0", "requests.nvidia.com/mig-1g.10gb": "0"}),
        (
            team(QuotaSpec(H100, 8, 4, cpu_cores=64, memory_gib=512, storage_gib=1000), QuotaSpec(L40S, 2, 0),
                 QuotaSpec(MIG, 7, 0, cpu_cores=14, memory_gib=56)),
            {"requests.nvidia.com/gpu": "14", "requests.nvidia.com/mig-1g.10gb": "7", "requests.cpu": "78",
             "requests.memory": "568Gi", "requests.storage": "1000Gi"},
        ),
    ],
)
def test_resource_quota_caps_every_gpu_resource_of_the_cluster(spec, hard):
    assert resource_quota_manifest(spec) == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-portal-quota", "namespace": "nlp", "labels": LABELS},
        "spec": {"hard": hard},
    }


def test_limit_range_defaults_gpus_to_zero_so_max_is_never_copied_into_default():
    assert limit_range_manifest(team()) == {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "gpu-portal-limits", "namespace": "nlp", "labels": LABELS},
        "spec": {"limits": [{
            "type": "Container",
            "max": {"nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "56"},
            "default": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0"},
            "defaultRequest": {"cpu": "500m", "memory": "2Gi", "nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0"},
        }]},
    }


def test_cluster_queue():
    spec = team(QuotaSpec(L40S, 2, 0, cpu_cores=16, memory_gib=128), QuotaSpec(H100, 8, 4, cpu_cores=64,
                memory_gib=512), QuotaSpec(MIG, 7, 7))
    assert cluster_queue_manifest(spec) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "nlp", "labels": LABELS},
        "spec": {
            "cohortName": "gpu-east",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "nlp"}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"], "flavors": [
                    {"name": "a100-mig-1g", "resources": [
                        {"name": "cpu", "nominalQuota": "0"}, {"name": "memory", "nominalQuota": "0"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "0"},
                        {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "7", "borrowingLimit": "7"}]},
                    {"name": "h100", "resources": [
                        {"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "512Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"},
                        {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "0", "borrowingLimit": "0"}]},
                    {"name": "l40s", "resources": [
                        {"name": "cpu", "nominalQuota": "16"}, {"name": "memory", "nominalQuota": "128Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "0"},
                        {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "0", "borrowingLimit": "0"}]},
                ]},
            ],
            "stopPolicy": "None",
        },
    }


def test_cluster_queue_without_cohort_has_no_borrowing_and_a_held_team_is_stopped():
    queue = cluster_queue_manifest(team(QuotaSpec(H100, 8, 4), cohort="", held=True))
    assert "cohortName" not in queue["spec"]
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "0"}, {"name": "memory", "nominalQuota": "0"},
        {"name": "nvidia.com/gpu", "nominalQuota": "8"}]
    assert queue["spec"]["stopPolicy"] == "Hold"
    assert local_queue_manifest(team(held=True))["spec"] == {"clusterQueue": "nlp", "stopPolicy": "Hold"}


def test_kueue_cluster_objects():
    assert resource_flavor_manifest(H100) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "h100", "labels": CLUSTER_LABELS},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "H100"},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    }
    assert workload_priority_class_manifest(name="gpu-portal-urgent", value=100, description="d") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
        "metadata": {"name": "gpu-portal-urgent", "labels": CLUSTER_LABELS}, "value": 100, "description": "d",
    }
    assert cohort_manifest(name="ai-research", parent="gpu-east")["spec"] == {"parentName": "gpu-east"}


def test_volcano_queue_deserves_its_quota_and_guarantees_nothing():
    """Deserved is what reclaim gives back; a guarantee would be capacity no other queue may borrow even while idle
    (the capacity plugin caps each queue at the cluster less the others' guarantees), so none is set: the team's
    guaranteed quota is lent while idle and reclaimed, as on Kueue."""
    spec = team(QuotaSpec(H100, 8, 4, cpu_cores=64, memory_gib=512), QuotaSpec(L40S, 2, 2), QuotaSpec(MIG, 0, 7))
    assert volcano_queue_manifest(spec, parent="ai-research") == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "nlp", "labels": LABELS},
        "spec": {
            "weight": 1,
            "reclaimable": True,
            "capability": {"nvidia.com/gpu": "16", "nvidia.com/mig-1g.10gb": "7", "cpu": "64", "memory": "512Gi"},
            "deserved": {"nvidia.com/gpu": "10", "nvidia.com/mig-1g.10gb": "0", "cpu": "64", "memory": "512Gi"},
            "parent": "ai-research",
        },
    }


def test_a_held_volcano_queue_admits_nothing():
    assert volcano_queue_manifest(team(QuotaSpec(H100, 8, 4), held=True))["spec"] == {
        "weight": 1, "reclaimable": True,
        "capability": {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0"},
    }


def test_department_queue_bounds_its_teams():
    a = team(QuotaSpec(H100, 8, 4))
    b = team(QuotaSpec(H100, 2, 2), QuotaSpec(MIG, 7, 0))
    dept = volcano_department_queue_manifest(name="ai-research", children=[a, b])
    assert dept["metadata"] == {"name": "ai-research-dept", "labels": CLUSTER_LABELS}
    assert dept["spec"]["capability"] == {"nvidia.com/gpu": "16", "nvidia.com/mig-1g.10gb": "7"}
    assert dept["spec"]["deserved"] == {"nvidia.com/gpu": "10", "nvidia.com/mig-1g.10gb": "7"}
    assert "guarantee" not in dept["spec"]


def _all_objects():
    spec = team(QuotaSpec(H100, 8, 4, cpu_cores=64, memory_gib=512), QuotaSpec(MIG, 7, 0))
    return [
        resource_quota_manifest(spec), limit_range_manifest(spec), cluster_queue_manifest(spec),
        local_queue_manifest(spec), resource_flavor_manifest(H100),
        workload_priority_class_manifest(name="gpu-portal-low", value=1, description="x"),
        cohort_manifest(name="ai-research", parent="gpu-east"), volcano_queue_manifest(spec, parent="ai"),
        volcano_queue_manifest(team(QuotaSpec(H100, 1, 1), held=True)),
        volcano_department_queue_manifest(name="ai", children=[spec]),
        {**cluster_queue_manifest(team(QuotaSpec(H100, 8, 4), cohort="", held=True))},
    ]


def test_every_object_is_valid_against_the_upstream_crds_and_kubernetes_schemas(crds_dir):
    from sandbox.validation import Validator

    validator = Validator(crd_dirs=[crds_dir])
    for obj in _all_objects():
        assert validator.validate(obj, strict=True) == [], (obj["kind"], obj["metadata"]["name"])


@pytest.mark.parametrize(("gib_", "written"), [(64, "64Gi"), (1024, "1Ti"), (1536, "1536Gi"), (4096, "4Ti"),
                                               (1048576, "1Pi")])
def test_memory_is_written_as_the_api_server_writes_it_back(gib_, written):
    # Quantity.String() on a binary quantity: the largest unit with a whole amount (kube-apiserver answers "4Ti" for
    # "4096Gi"); writing it so keeps the second sweep from re-applying a ResourceQuota that has not changed.
    assert gib(gib_) == written
