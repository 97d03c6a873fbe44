"""Volcano's allocate action on Nodes with network topology, through the sandbox's simulator with an explicit clock.
Each scenario follows volcano (pkg/scheduler/actions/allocate/allocate.go allocateForJob and
plugins/network-topology-aware/network_topology_aware.go; HyperNode members as pkg/scheduler/api/hyper_node_info.go
resolves them; the session's virtual top HyperNode and its adjustment of soft mode and highestTierName in
pkg/scheduler/framework/session.go): a gang kept to a tier goes into one HyperNode of an allowed tier, the lowest
tier first; soft mode is the same search up to the whole cluster. Upstream writes nothing on the PodGroup about the
HyperNode chosen: only the pods' nodes say it."""

import pytest

from sandbox import Sandbox
from sandbox.nodes import add_node
from sandbox.tests.test_simulator import VOLCANO, create, get, items, pod_template, pods, step

RACK, BLOCK = "topology.example.com/rack", "topology.example.com/block"
# Block b1: rack r1 with 2 nodes, rack r2 with 2 nodes; block b2: rack r3 with 1 node. 8 GPUs a node.
NODES = [("n1", "b1", "r1"), ("n2", "b1", "r1"), ("n3", "b1", "r2"), ("n4", "b1", "r2"), ("n5", "b2", "r3")]


TOPOLOGY = "topology.volcano.sh/v1alpha1"
ALLOCATED_ANNOTATION = "volcano.sh/job-allocated-hypernode"  # Volcano v1.13 wrote it; writes nothing


def hypernode(name, tier, members, tier_name=""):
    spec = {"tier": tier, "members": members} | ({"tierName": tier_name} if tier_name else {})
    return {"metadata": {"name": name}, "spec": spec}


def node_member(selector):
    return {"type": "Node", "selector": selector}


@pytest.fixture
def sb():
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sandbox:
        create(sandbox, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        create(sandbox, VOLCANO, "Queue", {"metadata": {"name": "qa"}, "spec": {"weight": 1, "reclaimable": True}})
        for name, block, rack in NODES:
            add_node(sandbox.store, name, {RACK: rack, BLOCK: block, "kubernetes.io/hostname": name},
                     {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"})
        yield sandbox


def racks_and_blocks(sb):
    """Tier 1 racks by three member kinds (exactMatch, regexMatch, labelMatch), tier 2 blocks of racks (a
    HyperNode member by exact name only)."""
    create(sb, TOPOLOGY, "HyperNode", hypernode("rack-r1", 1, [node_member({"exactMatch": {"name": "n1"}}),
                                                               node_member({"exactMatch": {"name": "n2"}})], "rack"))
    create(sb, TOPOLOGY, "HyperNode", hypernode("rack-r2", 1, [node_member({"regexMatch": {"pattern": "^n[34]$"}})],
                                                "rack"))
    create(sb, TOPOLOGY, "HyperNode", hypernode("rack-r3", 1, [
        node_member({"labelMatch": {"matchLabels": {RACK: "r3"}}})], "rack"))
    create(sb, TOPOLOGY, "HyperNode", hypernode("block-b1", 2, [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-r1"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-r2"}}}], "block"))
    create(sb, TOPOLOGY, "HyperNode", hypernode("block-b2", 2, [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-r3"}}}], "block"))


def gang(sb, name, workers, gpus, topology=None, node_selector=None):
    template = pod_template(gpus, node_selector=node_selector)
    spec = {"schedulerName": "volcano", "queue": "qa", "minAvailable": workers,
            "tasks": [{"name": "worker", "replicas": workers, "template": template}]}
    if topology:
        spec["networkTopology"] = topology
    create(sb, "batch.volcano.sh/v1alpha1", "Job", {"metadata": {"name": name, "namespace": "team-a"}, "spec": spec})


def nodes_of(sb, name):
    return sorted(p["spec"]["nodeName"] for p in pods(sb, "team-a", name))


def podgroup(sb, name):
    found = [pg for pg in items(sb, VOLCANO, "PodGroup", "team-a")
             if pg["metadata"]["ownerReferences"][0]["name"] == name]
    return found[0]


def test_hard_rack_keeps_the_gang_on_one_racks_nodes(sb):
    """Tier 1 first; among racks that hold it, the fuller one by bin-packing (both empty: the first by name)."""
    racks_and_blocks(sb)
    gang(sb, "ring", 2, 8, {"mode": "hard", "highestTierAllowed": 1})
    step(sb, 0)
    assert nodes_of(sb, "ring") == ["n1", "n2"]
    assert ALLOCATED_ANNOTATION not in (podgroup(sb, "ring")["metadata"].get("annotations") or {})
    assert podgroup(sb, "ring")["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


def test_hard_rack_too_small_fits_a_block_when_tier_two_is_allowed(sb):
    """No rack has 3 nodes: at highestTierAllowed 1 the gang waits (NotEnoughResources though the queue has room);
    at 2 the next gradient, the blocks, is tried and block b1 holds it."""
    racks_and_blocks(sb)
    gang(sb, "wide", 3, 8, {"mode": "hard", "highestTierAllowed": 1})
    step(sb, 0)
    assert pods(sb, "team-a", "wide") == []
    group = podgroup(sb, "wide")
    assert group["status"]["phase"] == "Inqueue"  # enqueue (quota) let it in: placement is what blocks
    unschedulable = next(c for c in group["status"]["conditions"] if c["type"] == "Unschedulable")
    assert unschedulable["reason"] == "NotEnoughResources"
    gang(sb, "wider", 3, 8, {"mode": "hard", "highestTierAllowed": 2})
    step(sb, 1)
    assert nodes_of(sb, "wider") == ["n1", "n2", "n3"]  # block b1


def test_hard_mode_takes_the_rack_that_still_has_room(sb):
    """A rack already full is not eligible (its idle resources are below the gang's minResources)."""
    racks_and_blocks(sb)
    gang(sb, "first", 2, 8, {"mode": "hard", "highestTierAllowed": 1})
    step(sb, 0)
    gang(sb, "second", 2, 8, {"mode": "hard", "highestTierAllowed": 1})
    step(sb, 1)
    assert nodes_of(sb, "first") == ["n1", "n2"] and nodes_of(sb, "second") == ["n3", "n4"]  # racks r1, r2


def test_soft_mode_keeps_the_gang_in_the_lowest_hypernode_that_holds_it_then_spreads(sb):
    """Soft is the hard search up to the virtual top HyperNode (convertSoftToHardTopology): racks first, and among
    racks the fuller by bin-packing. n3 is half full and n4 full, so rack r2 is not eligible (idle 4 GPUs < 8);
    r1 (two empty nodes) and r3 (one) both hold the gang, and r3 packs tighter: both tasks go to n5. Node by node,
    binpack would have put the first task on half-full n3 and the second, r2 being full, on n1: split over racks.
    A gang no rack or block holds still runs, over the whole cluster (the top HyperNode)."""
    racks_and_blocks(sb)
    gang(sb, "half", 1, 4, node_selector={"kubernetes.io/hostname": "n3"})
    gang(sb, "full", 1, 8, node_selector={"kubernetes.io/hostname": "n4"})
    step(sb, 0)
    gang(sb, "soft", 2, 4, {"mode": "soft"})
    step(sb, 1)
    assert nodes_of(sb, "soft") == ["n5", "n5"]
    assert ALLOCATED_ANNOTATION not in (podgroup(sb, "soft")["metadata"].get("annotations") or {})
    gang(sb, "spread", 3, 8, {"mode": "soft"})
    step(sb, 2)
    assert nodes_of(sb, "spread") == []  # 8 + 8 + 4 GPUs free, on n1, n2 and n3: no 8-GPU room for the third
    gang(sb, "two", 2, 8, {"mode": "soft"})
    step(sb, 3)
    assert nodes_of(sb, "two") == ["n1", "n2"]


def test_highest_tier_name_is_the_tier_of_hypernodes_with_that_tier_name(sb):
    """highestTierName "rack" is tier 1 and "block" tier 2 through the HyperNodes' tierName
    (translateHighestTierNameToAllowed): no rack holds three nodes, a block does."""
    racks_and_blocks(sb)
    gang(sb, "rack", 3, 8, {"mode": "hard", "highestTierName": "rack"})
    step(sb, 0)
    assert nodes_of(sb, "rack") == []
    gang(sb, "block", 3, 8, {"mode": "hard", "highestTierName": "block"})
    step(sb, 1)
    assert nodes_of(sb, "block") == ["n1", "n2", "n3"]


def test_a_tier_above_every_hypernode_is_the_whole_cluster(sb):
    """The virtual top HyperNode is one tier above the highest real one (addClusterTopHyperNode): tier 3 here holds
    all five nodes; with no HyperNodes at all it is tier 1."""
    gang(sb, "bare", 2, 8, {"mode": "hard", "highestTierAllowed": 1})
    step(sb, 0)
    assert nodes_of(sb, "bare") == ["n1", "n2"]  # no HyperNodes: tier 1 is the top, every node
    racks_and_blocks(sb)
    gang(sb, "all", 3, 8, {"mode": "hard", "highestTierAllowed": 3})
    step(sb, 1)
    assert nodes_of(sb, "all") == ["n3", "n4", "n5"]


def test_a_hypernode_member_chosen_by_pattern_holds_nothing(sb):
    """"HyperNode member does not support regex match" (BuildHyperNodeCache): a block naming its racks by pattern
    is empty, so a gang only it could hold waits, where the same block by exact names takes it."""
    for name, nodes in (("rack-r1", ("n1", "n2")), ("rack-r2", ("n3", "n4"))):
        create(sb, TOPOLOGY, "HyperNode", hypernode(name, 1, [node_member({"exactMatch": {"name": n}})
                                                              for n in nodes]))
    create(sb, TOPOLOGY, "HyperNode", hypernode("block-b1", 2, [
        {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^rack-r[12]$"}}}]))
    gang(sb, "wide", 3, 8, {"mode": "hard", "highestTierAllowed": 2})
    step(sb, 0)
    assert nodes_of(sb, "wide") == []
    sb.store.patch(sb.store.kind(TOPOLOGY, "HyperNode"), None, "block-b1", {"spec": {"members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-r1"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-r2"}}}]}}, "merge")
    step(sb, 1)
    assert nodes_of(sb, "wide") == ["n1", "n2", "n3"]
    # Placed now: gang adds Scheduled and leaves the old Unschedulable as it was (UpdatePodGroupCondition replaces
    # by type and removes nothing), so only the times tell which is news.
    conditions = {c["type"]: c for c in podgroup(sb, "wide")["status"]["conditions"]}
    assert conditions["Unschedulable"]["status"] == conditions["Scheduled"]["status"] == "True"
    assert conditions["Scheduled"]["lastTransitionTime"] > conditions["Unschedulable"]["lastTransitionTime"]


def test_nodes_are_filled_by_what_fits_and_taints_keep_pods_off(sb):
    """predicates: a pod needs a node with its requests free and its NoSchedule taints tolerated."""
    sb.store.patch(sb.store.kind("v1", "Node"), None, "n1", {"spec": {"taints": [
        {"key": "gpu-portal.io/spot", "value": "true", "effect": "NoSchedule"}]}}, "merge")
    assert get(sb, "v1", "Node", None, "n1")["spec"]["taints"][0]["effect"] == "NoSchedule"
    gang(sb, "plain", 1, 8)
    step(sb, 0)
    assert nodes_of(sb, "plain") == ["n2"]  # n1's taint is not tolerated
    gang(sb, "big", 1, 16)
    step(sb, 1)
    assert pods(sb, "team-a", "big") == []  # no node has 16 GPUs, though the cluster has them
