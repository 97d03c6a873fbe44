"""Fair-sharing weights, spot flavors after reserved ones, and the cluster's Kueue Topology, as the quota builders
write them; every object validated strictly against the upstream CRDs (Kueue v0.19.2, Volcano v1.15.1)."""

from backends.kueue_manifests import (
    cluster_queue_manifest,
    cohort_manifest,
    resource_flavor_manifest,
    topology_manifest,
    topology_name,
)
from backends.specs import FlavorSpec, QuotaSpec, TeamQuotaSpec
from backends.volcano_manifests import volcano_department_queue_manifest, volcano_queue_manifest

SPOT_TAINT = {"key": "gpu-portal.io/spot", "value": "true", "effect": "NoSchedule"}
H100 = FlavorSpec(name="h100", resource_name="nvidia.com/gpu", gpus_per_node=8,
                  node_labels={"nvidia.com/gpu.product": "H100", "gpu-portal.io/capacity": "reserved"})
# Named to sort before h100: only `spot` may put it after.
A_SPOT = FlavorSpec(name="a-h100-spot", resource_name="nvidia.com/gpu", gpus_per_node=8, spot=True,
                    node_labels={"nvidia.com/gpu.product": "H100", "gpu-portal.io/capacity": "spot"},
                    node_taints=[SPOT_TAINT])
LEVELS = ["topology.example.com/block", "topology.example.com/rack", "kubernetes.io/hostname"]


def team(*quotas, weight=1, cohort="gpu-east"):
    return TeamQuotaSpec(slug="nlp", namespace="nlp", quotas=tuple(quotas), cluster_flavors=(H100, A_SPOT),
                         cohort=cohort, weight=weight)


def test_fair_sharing_weight_is_written_only_when_not_the_default():
    assert "fairSharing" not in cluster_queue_manifest(team(QuotaSpec(H100, 8, 4)))["spec"]
    assert cluster_queue_manifest(team(QuotaSpec(H100, 8, 4), weight=3))["spec"]["fairSharing"] == {"weight": "3"}
    assert cohort_manifest(name="ai", parent="gpu-east", weight=2)["spec"] == {
        "parentName": "gpu-east", "fairSharing": {"weight": "2"}}
    assert volcano_queue_manifest(team(QuotaSpec(H100, 8, 4), weight=3))["spec"]["weight"] == 3
    dept = volcano_department_queue_manifest(name="ai", children=[team(QuotaSpec(H100, 8, 4))], weight=5)
    assert dept["spec"]["weight"] == 5


def test_spot_flavors_come_after_reserved_ones_and_fungibility_falls_through_to_them():
    spec = cluster_queue_manifest(team(QuotaSpec(A_SPOT, 16, 0), QuotaSpec(H100, 8, 4)))["spec"]
    (group,) = spec["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["h100", "a-h100-spot"]
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert "flavorFungibility" not in cluster_queue_manifest(team(QuotaSpec(H100, 8, 4)))["spec"]


def test_topology_and_the_flavors_that_name_it():
    assert topology_manifest(LEVELS)["spec"] == {"levels": [{"nodeLabel": label} for label in LEVELS]}
    TOPOLOGY = topology_manifest(LEVELS)["metadata"]["name"]
    assert TOPOLOGY == topology_name(LEVELS) != topology_name(LEVELS[1:])  # other levels: another Topology
    with_topology = FlavorSpec(**{**H100.__dict__, "topology": TOPOLOGY})
    assert resource_flavor_manifest(with_topology)["spec"]["topologyName"] == TOPOLOGY
    # Kueue refuses topologyName on a flavor without node labels (the CRD's CEL rule), so none is written.
    bare = FlavorSpec(name="l4", resource_name="nvidia.com/gpu", gpus_per_node=4, topology=TOPOLOGY)
    assert "topologyName" not in resource_flavor_manifest(bare)["spec"]


def test_every_placement_object_is_valid_against_the_upstream_crds(crds_dir):
    from sandbox.validation import Validator

    validator = Validator(crd_dirs=[crds_dir])
    spec = team(QuotaSpec(A_SPOT, 16, 0), QuotaSpec(H100, 8, 4), weight=7)
    objects = [
        cluster_queue_manifest(spec), volcano_queue_manifest(spec), topology_manifest(LEVELS),
        resource_flavor_manifest(FlavorSpec(**{**A_SPOT.__dict__, "topology": topology_name(LEVELS)})),
        cohort_manifest(name="ai", parent="gpu-east", weight=4),
        volcano_department_queue_manifest(name="ai", children=[spec], weight=65535),
    ]
    for obj in objects:
        assert validator.validate(obj, strict=True) == [], (obj["kind"], obj["metadata"]["name"])
    # The CRDs' own rules hold where the builders keep away from them.
    bad_topology = topology_manifest(["kubernetes.io/hostname", "topology.example.com/rack"])
    assert any("lowest level" in e for e in validator.validate(bad_topology, strict=True))
    bare = resource_flavor_manifest(FlavorSpec(name="l4", resource_name="nvidia.com/gpu", gpus_per_node=4))
    bare["spec"]["topologyName"] = topology_name(LEVELS)
    assert any("at least one nodeLabel" in e for e in validator.validate(bare, strict=True))
