"""Which HyperNode holds a Volcano gang, from its pods' nodes, as volcano v1.15.1 recovers it
(pkg/scheduler/framework/session.go recoverAllocatedHyperNode, getLowestTierHyperNode) over members resolved as
pkg/scheduler/api/hyper_node_info.go does (BuildHyperNodeCache, GetMembers). The fixtures are HyperNodes as the
upstream CRD shapes them (topology.volcano.sh/v1alpha1, spec.tier, spec.members[].type/selector)."""

from jobs import hypernodes
from jobs.hypernodes import gang_hypernode, held_nodes, needs_node_labels, placement

RACK, BLOCK = "example.com/rack", "example.com/block"


def hypernode(name, tier, members, labels=None, deleting=False):
    metadata = {"name": name, "labels": labels or {}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-25T00:00:00Z"
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": metadata,
            "spec": {"tier": tier, "members": members}}


def nodes(*selectors):
    return [{"type": "Node", "selector": s} for s in selectors]


def children(*names, how="exactMatch"):
    return [{"type": "HyperNode", "selector": {how: {"name": n} if how == "exactMatch" else {"pattern": n}}}
            for n in names]


TREE = [
    hypernode("rack-r1", 1, nodes({"exactMatch": {"name": "n1"}}, {"exactMatch": {"name": "n2"}}),
              {RACK: "r1", hypernodes.SOURCE_LABEL: "label"}),
    hypernode("rack-r2", 1, nodes({"regexMatch": {"pattern": "n[34]"}}), {RACK: "r2"}),
    hypernode("rack-r3", 1, nodes({"labelMatch": {"matchLabels": {RACK: "r3"}}}), {RACK: "r3"}),
    hypernode("block-b1", 2, children("rack-r1", "rack-r2"), {BLOCK: "b1"}),
    hypernode("block-b2", 2, children("rack-r3"), {BLOCK: "b2"}),
]
LABELS = {"n1": {RACK: "r1"}, "n2": {RACK: "r1"}, "n3": {RACK: "r2"}, "n4": {RACK: "r2"}, "n5": {RACK: "r3"},
          "n40": {RACK: "r4"}}


def on(*names):
    return {name: LABELS.get(name) for name in names}


def test_the_lowest_hypernode_holding_every_node_of_the_gang():
    def lowest(*names):
        return gang_hypernode(held_nodes(TREE, on(*names)), on(*names))

    assert lowest("n1", "n2") == "rack-r1"
    assert lowest("n1", "n3") == "block-b1"  # two racks of one block
    assert lowest("n1", "n5") == ""  # two blocks: no HyperNode holds both
    assert lowest() == ""


def test_node_members_by_name_pattern_and_labels():
    held = held_nodes(TREE, on("n1", "n3", "n40", "n5"))
    assert held["rack-r1"] == (1, frozenset({"n1"}))
    assert held["rack-r2"][1] == {"n3", "n40"}  # Go's MatchString is unanchored: "n[34]" matches n40 too
    assert held["rack-r3"][1] == {"n5"}
    assert held["block-b1"] == (2, frozenset({"n1", "n3", "n40"}))
    unread = held_nodes(TREE, {"n5": None})  # labels not read: a label member cannot choose the node
    assert unread["rack-r3"][1] == frozenset()


def test_what_upstream_resolves_to_nothing():
    tree = [
        hypernode("empty-labels", 1, nodes({"labelMatch": {}})),  # an empty selector chooses no node
        hypernode("bad-pattern", 1, nodes({"regexMatch": {"pattern": "n[1"}})),  # does not compile: nothing
        hypernode("rack-r1", 1, nodes({"exactMatch": {"name": "n1"}})),
        hypernode("by-pattern", 2, children("rack-.*", how="regexMatch")),  # HyperNode members: exact only
        hypernode("going", 2, children("rack-r1"), deleting=True),  # being deleted: holds nothing
        hypernode("loop-a", 3, children("loop-b")), hypernode("loop-b", 3, children("loop-a")),
        hypernode("missing-child", 2, children("rack-r9")),
    ]
    held = held_nodes(tree, on("n1"))
    assert {name: members for name, (_, members) in held.items() if members} == {"rack-r1": {"n1"}}
    assert "going" not in held


def test_label_expressions_follow_label_selector_semantics():
    tree = [hypernode("gpu-racks", 1, nodes({"labelMatch": {"matchExpressions": [
        {"key": RACK, "operator": "In", "values": ["r1", "r2"]},
        {"key": "example.com/drain", "operator": "DoesNotExist"},
        {"key": "example.com/pool", "operator": "NotIn", "values": ["spot"]}]}}))]
    found = {"a": {RACK: "r1"}, "b": {RACK: "r2", "example.com/pool": "spot"}, "c": {RACK: "r1",
             "example.com/drain": "true"}, "d": {RACK: "r9"}, "e": {}}
    assert held_nodes(tree, found)["gpu-racks"][1] == {"a"}
    assert needs_node_labels(tree) and not needs_node_labels(TREE[:2])


def test_placement_names_the_hypernode_and_its_domain():
    assert placement(TREE, on("n1", "n2")) == {"hypernode": "rack-r1", "domains": [{RACK: "r1"}]}
    assert placement(TREE, on("n1", "n5")) == {"spread": True}
    assert placement(TREE, on("n99")) == {"unmapped": True}  # in no HyperNode at all
    assert placement([], on("n1")) == {"unmapped": True}  # the cluster has none (or serves no HyperNode kind)
    assert placement(TREE, {}) == {}
    bare = [hypernode("hand-made", 1, nodes({"exactMatch": {"name": "n1"}}))]
    assert placement(bare, on("n1")) == {"hypernode": "hand-made"}
