"""The HyperNode membership rule is written twice, on purpose: the portal's (jobs/hypernodes.py, which HyperNode holds
a gang, read from a real cluster) and the simulator's (sandbox/simulator/volcano_nodes.py, the emulation of
Volcano's scheduler cache, which may not import the portal). Both transcribe pkg/scheduler/api/hyper_node_info.go
(BuildHyperNodeCache, GetMembers); here they are asked the same questions and must give the same answers."""

import pytest

from jobs.hypernodes import held_nodes
from sandbox.simulator import volcano_nodes
from tests.jobs.test_hypernodes import BLOCK, RACK, children, hypernode, nodes

LABELS = {"n1": {RACK: "r1", "pool": "a"}, "n2": {RACK: "r1"}, "n3": {RACK: "r2", "pool": "b"}, "n4": {RACK: "r2"},
          "n5": {RACK: "r3", "pool": "a"}, "n40": {RACK: "r4"}, "gpu-7": {}}

CASES = {
    "exact names": [hypernode("r1", 1, nodes({"exactMatch": {"name": "n1"}}, {"exactMatch": {"name": "n2"}},
                                             {"exactMatch": {"name": "absent"}}))],
    "an unanchored pattern, Go's RE2": [hypernode("r2", 1, nodes({"regexMatch": {"pattern": "n[34]"}})),
                                        hypernode("gpus", 1, nodes({"regexMatch": {"pattern": "^gpu-\\d+$"}}))],
    "a pattern Go does not compile": [hypernode("bad", 1, nodes({"regexMatch": {"pattern": "(?<=n)1"}}))],
    "labels": [hypernode("r3", 1, nodes({"labelMatch": {"matchLabels": {RACK: "r3"}}})),
               hypernode("pool-a", 1, nodes({"labelMatch": {"matchExpressions": [
                   {"key": "pool", "operator": "In", "values": ["a"]}]}})),
               hypernode("not-b", 1, nodes({"labelMatch": {"matchExpressions": [
                   {"key": "pool", "operator": "NotIn", "values": ["b"]}]}})),
               hypernode("pooled", 1, nodes({"labelMatch": {"matchExpressions": [
                   {"key": "pool", "operator": "Exists"}]}})),
               hypernode("unpooled", 1, nodes({"labelMatch": {"matchExpressions": [
                   {"key": "pool", "operator": "DoesNotExist"}]}})),
               hypernode("both", 1, nodes({"labelMatch": {"matchLabels": {RACK: "r1"}, "matchExpressions": [
                   {"key": "pool", "operator": "Exists"}]}}))],
    "an empty label selector chooses nothing": [hypernode("empty", 1, nodes({"labelMatch": {}}))],
    "tiers of HyperNodes": [
        hypernode("r1", 1, nodes({"exactMatch": {"name": "n1"}}, {"exactMatch": {"name": "n2"}})),
        hypernode("r2", 1, nodes({"regexMatch": {"pattern": "n[34]"}})),
        hypernode("b1", 2, children("r1", "r2"), {BLOCK: "b1"}),
        hypernode("top", 3, children("b1", "missing"))],
    "a HyperNode member by pattern holds nothing": [
        hypernode("r1", 1, nodes({"exactMatch": {"name": "n1"}})),
        hypernode("b1", 2, children("r.*", how="regexMatch"))],
    "a HyperNode being deleted holds nothing": [
        hypernode("r1", 1, nodes({"exactMatch": {"name": "n1"}}), deleting=True),
        hypernode("r2", 1, nodes({"exactMatch": {"name": "n3"}})),
        hypernode("b1", 2, children("r1", "r2"))],
    # Not an upstream layout (a tier holds lower tiers), but both must still stop, and agree, on a loop of members.
    "a loop of HyperNode members": [
        hypernode("a", 2, [*children("b"), *nodes({"exactMatch": {"name": "n1"}})]),
        hypernode("b", 2, [*children("c"), *nodes({"exactMatch": {"name": "n2"}})]),
        hypernode("c", 2, [*children("b"), *nodes({"exactMatch": {"name": "n3"}})])],
}


def portal_answer(objects):
    return {name: set(members) for name, (_, members) in held_nodes(objects, LABELS).items()}


def simulator_answer(objects):
    found = volcano_nodes.hypernodes(objects, {name: {"labels": labels} for name, labels in LABELS.items()})
    # The simulator keeps a HyperNode being deleted (holding nothing); the portal leaves it out.
    return {name: set(info["nodes"]) for name, info in found.items()
            if not next(h for h in objects if h["metadata"]["name"] == name)["metadata"].get("deletionTimestamp")}


@pytest.mark.parametrize("case", CASES)
def test_the_portal_and_the_simulator_resolve_hypernode_members_alike(case):
    assert portal_answer(CASES[case]) == simulator_answer(CASES[case])


def test_the_comparison_sees_a_difference():
    objects = CASES["labels"]
    assert portal_answer(objects)["pool-a"] == {"n1", "n5"}
    assert portal_answer(objects) != simulator_answer(CASES["tiers of HyperNodes"])
