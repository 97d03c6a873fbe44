"""Volcano's allocate action on Nodes with network topology, through the sandbox's simulator with an explicit clock.
Each scenario follows volcano v1.15.1 (pkg/scheduler/actions/allocate/allocate.go allocateForJob and
plugins/network-topology-aware/network_topology_aware.go; HyperNode members as pkg/scheduler/api/hyper_node_info.go
resolves them): a hard-mode gang goes into one HyperNode of an allowed tier, the lowest tier first; soft mode packs
close and spreads when it must."""

import pytest

from sandbox import Sandbox
from sandbox.nodes import add_node
from sandbox.simulator.volcano_nodes import ALLOCATED_ANNOTATION
from tests.sandbox.test_simulator import VOLCANO, create, get, items, pod_template, pods, step

RACK, BLOCK = "topology.example.com/rack", "topology.example.com/block"
# Block b1: rack r1 with 2 nodes, rack r2 with 2 nodes; block b2: rack r3 with 1 node. 8 GPUs a node.
NODES = [("n1", "b1", "r1"), ("n2", "b1", "r1"), ("n3", "b1", "r2"), ("n4", "b1", "r2"), ("n5", "b2", "r3")]


def hypernode(name, tier, members):
    return {"metadata": {"name": name}, "spec": {"tier": tier, "members": members}}


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
    """Tier 1 racks by three member kinds (exactMatch, regexMatch, labelMatch), tier 2 blocks of racks."""
    topology = "topology.volcano.sh/v1alpha1"
    create(sb, topology, "HyperNode", hypernode("rack-r1", 1, [node_member({"exactMatch": {"name": "n1"}}),
                                                               node_member({"exactMatch": {"name": "n2"}})]))
    create(sb, topology, "HyperNode", hypernode("rack-r2", 1, [node_member({"regexMatch": {"pattern": "^n[34]$"}})]))
    create(sb, topology, "HyperNode", hypernode("rack-r3", 1, [
        node_member({"labelMatch": {"matchLabels": {RACK: "r3"}}})]))
    create(sb, topology, "HyperNode", hypernode("block-b1", 2, [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-r1"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-r2"}}}]))
    create(sb, topology, "HyperNode", hypernode("block-b2", 2, [
        {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^rack-r3$"}}}]))


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
    assert podgroup(sb, "ring")["metadata"]["annotations"][ALLOCATED_ANNOTATION] == "rack-r1"
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
    assert nodes_of(sb, "wider") == ["n1", "n2", "n3"]
    assert podgroup(sb, "wider")["metadata"]["annotations"][ALLOCATED_ANNOTATION] == "block-b1"


def test_hard_mode_takes_the_rack_that_still_has_room(sb):
    """A rack already full is not eligible (its idle resources are below the gang's minResources)."""
    racks_and_blocks(sb)
    gang(sb, "first", 2, 8, {"mode": "hard", "highestTierAllowed": 1})
    step(sb, 0)
    gang(sb, "second", 2, 8, {"mode": "hard", "highestTierAllowed": 1})
    step(sb, 1)
    assert nodes_of(sb, "first") == ["n1", "n2"] and nodes_of(sb, "second") == ["n3", "n4"]
    assert podgroup(sb, "second")["metadata"]["annotations"][ALLOCATED_ANNOTATION] == "rack-r2"


def test_soft_mode_packs_close_then_spreads(sb):
    """Soft: after the first task, nodes sharing the lowest HyperNode with the gang score higher
    (networkTopologyAwareScore), before bin-packing and names. n4 is half full, so binpack puts the first task
    there; the second goes beside it on n3 (same rack), not on n1 as names alone would have it. A gang larger
    than any rack still runs, over the racks of one block before another block."""
    racks_and_blocks(sb)
    gang(sb, "half", 1, 4, node_selector={"kubernetes.io/hostname": "n4"})
    step(sb, 0)
    gang(sb, "soft", 2, 4, {"mode": "soft"})
    step(sb, 1)
    assert nodes_of(sb, "soft") == ["n3", "n4"]
    assert ALLOCATED_ANNOTATION not in (podgroup(sb, "soft")["metadata"].get("annotations") or {})
    gang(sb, "spread", 3, 8, {"mode": "soft"})
    step(sb, 2)
    assert nodes_of(sb, "spread") == ["n1", "n2", "n5"]  # b1's racks are full after n1, n2: then block b2


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
