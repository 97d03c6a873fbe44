"""The sandbox plays Volcano's HyperNode label discoverer (volcano pkg/controllers/hypernode/discovery/label/
label.go, hypernode_controller.go reconcileTopology, config/loader.go), and the HyperNodes it writes pass the
upstream CRD's schema (the sandbox validates them against it)."""

import yaml

from sandbox import Sandbox
from sandbox.nodes import add_node
from sandbox.simulator.volcano_discovery import label_types
from sandbox.tests.test_simulator import create, items, step

RACK, BLOCK, HOST = "topology.example.com/rack", "topology.example.com/block", "kubernetes.io/hostname"
CONFIG = {"networkTopologyDiscovery": [{"source": "label", "enabled": True, "config": {"networkTopologyTypes": {
    "gpu": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}}}]}


def configure(sb, config):
    namespaces = [n["metadata"]["name"] for n in items(sb, "v1", "Namespace")]
    if "volcano-system" not in namespaces:
        create(sb, "v1", "Namespace", {"metadata": {"name": "volcano-system"}})
    body = {"metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
            "data": {"volcano-controller.conf": yaml.safe_dump(config)}}
    rt = sb.store.kind("v1", "ConfigMap")
    try:
        sb.store.get(rt, "volcano-system", "volcano-controller-configmap")
    except Exception:  # noqa: BLE001 - absent: create it
        create(sb, "v1", "ConfigMap", body)
    else:
        sb.store.patch(rt, "volcano-system", "volcano-controller-configmap", {"data": body["data"]}, "merge")


def node(sb, name, block, rack):
    add_node(sb.store, name, {BLOCK: block, RACK: rack, HOST: name}, {"cpu": "8", "nvidia.com/gpu": "8"})


def hypernodes(sb):
    """The HyperNodes by the rack or block they stand for (None: one made by hand, with neither label)."""
    found = {}
    for h in items(sb, "topology.volcano.sh/v1alpha1", "HyperNode"):
        labels = h["metadata"].get("labels") or {}
        found[labels.get(RACK) or labels.get(BLOCK)] = h
    return found


def members(h):
    return [m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]]


def test_the_config_lists_tiers_from_the_narrowest_and_drops_the_node_level():
    assert label_types(yaml.safe_dump(CONFIG)) == {"gpu": [RACK, BLOCK]}
    off = {"networkTopologyDiscovery": [{**CONFIG["networkTopologyDiscovery"][0], "enabled": False}]}
    assert label_types(yaml.safe_dump(off)) is None
    repeated = {"networkTopologyDiscovery": [{"source": "label", "enabled": True, "config": {
        "networkTopologyTypes": {"a": [{"nodeLabel": RACK}, {"nodeLabel": RACK}], "b" * 21: [{"nodeLabel": RACK}]}}}]}
    assert label_types(yaml.safe_dump(repeated)) == {}  # a repeated label, a type name over 20 characters
    assert label_types("networkTopologyDiscovery: [") is None


def test_nodes_labels_become_tiered_hypernodes_that_follow_the_nodes(crds_dir):
    """On a sandbox that holds HyperNodes to the upstream CRD's schema, as a real API server would."""
    with Sandbox(simulate=True, tick=None, crd_dirs=[crds_dir], builtin_custom_kinds=True) as sb:
        for name, block, rack in (("n1", "b1", "r1"), ("n2", "b1", "r1"), ("n3", "b1", "r2"), ("n4", "b2", "r3")):
            node(sb, name, block, rack)
        step(sb, 0)
        assert hypernodes(sb) == {}  # no configuration: no discovery
        configure(sb, CONFIG)
        step(sb, 1)
        found = hypernodes(sb)
        assert sorted(found) == ["b1", "b2", "r1", "r2", "r3"]
        r1, b1 = found["r1"], found["b1"]
        assert (r1["spec"]["tier"], r1["spec"]["tierName"], members(r1)) == (1, RACK, ["n1", "n2"])
        assert r1["metadata"]["name"].startswith("hypernode-gpu-tier1-")
        assert r1["metadata"]["labels"] == {"volcano.sh/network-topology-source": "label", RACK: "r1"}
        assert (b1["spec"]["tier"], {m["type"] for m in b1["spec"]["members"]}) == (2, {"HyperNode"})
        assert sorted(members(b1)) == sorted([found["r1"]["metadata"]["name"], found["r2"]["metadata"]["name"]])
        names = {k: h["metadata"]["name"] for k, h in found.items()}

        # n3 moves to rack r1: r2 empties and goes; names of the HyperNodes kept are kept.
        node(sb, "n3", "b1", "r1")
        step(sb, 2)
        found = hypernodes(sb)
        assert sorted(found) == ["b1", "b2", "r1", "r3"]
        assert members(found["r1"]) == ["n1", "n2", "n3"]
        assert {k: h["metadata"]["name"] for k, h in found.items()} == {k: v for k, v in names.items() if k != "r2"}
        step(sb, 3)
        assert hypernodes(sb) == found  # nothing changed: nothing written

        # Turning discovery off stops the discoverer (discovery/manager.go handleRemovedSources): what it made stays
        # as it was, whatever the nodes do. A HyperNode made by hand is never the discoverer's.
        create(sb, "topology.volcano.sh/v1alpha1", "HyperNode", {"metadata": {"name": "by-hand"}, "spec": {
            "tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n4"}}}]}})
        configure(sb, {"networkTopologyDiscovery": [{**CONFIG["networkTopologyDiscovery"][0], "enabled": False}]})
        node(sb, "n5", "b2", "r9")
        step(sb, 4)
        after = hypernodes(sb)
        assert {k: h for k, h in after.items() if k is not None} == found and None in after  # None: by-hand
        # Enabled again with a level the nodes do not carry, it describes nothing: its HyperNodes go.
        configure(sb, {"networkTopologyDiscovery": [{"source": "label", "enabled": True, "config": {
            "networkTopologyTypes": {"gpu": [{"nodeLabel": "example.com/none"}, {"nodeLabel": HOST}]}}}]})
        step(sb, 5)
        assert [h["metadata"]["name"] for h in items(sb, "topology.volcano.sh/v1alpha1", "HyperNode")] == ["by-hand"]
