"""Where a Volcano gang sits in the cluster's network: the lowest HyperNode holding every node its pods run on.

Volcano keeps a job's allocated HyperNode in the scheduler's memory only; on each session it recovers it from the
nodes the job's pods were bound to: the HyperNodes holding all of them, the lowest tier of those
(pkg/scheduler/framework/session.go recoverAllocatedHyperNode, getLowestTierHyperNode). Nothing on the PodGroup
records it, so the portal derives it the same way, from the pods' `spec.nodeName` and the HyperNodes' members.

Members (pkg/scheduler/api/hyper_node_info.go BuildHyperNodeCache, GetMembers): a Node member is chosen by
`exactMatch` name, Go `regexMatch` pattern (unanchored) or `labelMatch` selector (an empty selector chooses
nothing); a HyperNode member only by `exactMatch` name, and a HyperNode being deleted holds nothing. A HyperNode
made by the label discoverer carries its level's node label and value beside its source label
(pkg/controllers/hypernode/discovery/label/label.go).

Pure functions over the dicts read from the API server; no database, no clock. The sandbox's Volcano emulates the
same member rule on its own (sandbox/simulator/volcano_nodes.py, which may not import the portal);
tests/jobs/test_hypernodes_agree.py holds the two to the same answers.
"""

from __future__ import annotations

import re2

from tenants.topology import VOLCANO_SOURCE_LABEL as SOURCE_LABEL


def needs_node_labels(hypernodes: list[dict]) -> bool:
    """Whether some Node member is chosen by labels, so the nodes' labels must be read to resolve it."""
    return any(member.get("type") == "Node" and "labelMatch" in (member.get("selector") or {})
               for h in hypernodes for member in (h.get("spec") or {}).get("members") or [])


def _label_match(selector: dict, labels: dict) -> bool:
    """metav1.LabelSelectorAsSelector's meaning: every matchLabels pair and every expression holds."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, values = expression.get("key"), expression.get("values") or []
        held = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}.get(expression.get("operator"))
        if not held:
            return False
    return True


def _node_members(selector: dict, nodes: dict[str, dict | None]) -> set[str]:
    """Which of `nodes` (name → labels, None when unread) a Node member's selector chooses."""
    chosen: set[str] = set()
    if "exactMatch" in selector:
        name = (selector.get("exactMatch") or {}).get("name") or ""
        if not name:
            return chosen
        chosen |= {name} & nodes.keys()
    if "regexMatch" in selector:
        try:
            pattern = re2.compile((selector.get("regexMatch") or {}).get("pattern") or "")
        except re2.error:
            return set()
        chosen |= {name for name in nodes if pattern.search(name)}
    label_selector = selector.get("labelMatch") or {}
    if label_selector.get("matchLabels") or label_selector.get("matchExpressions"):
        chosen |= {name for name, labels in nodes.items() if labels is not None and _label_match(label_selector,
                                                                                              labels)}
    return chosen


def held_nodes(hypernodes: list[dict], nodes: dict[str, dict | None]) -> dict[str, tuple[int, frozenset[str]]]:
    """Per HyperNode: its tier and which of `nodes` it holds, its own Node members' and its HyperNode members'."""
    by_name = {h["metadata"]["name"]: h for h in hypernodes if not h["metadata"].get("deletionTimestamp")}
    held: dict[str, frozenset[str]] = {}

    def resolve(name: str, chain: frozenset) -> tuple[frozenset[str], bool]:
        """The nodes under `name`, and whether a cycle was cut on the way (such an answer depends on where the
        walk started, so it is not kept for the next one)."""
        if name in held:
            return held[name], False
        if name not in by_name:  # not (yet) in the cluster
            return frozenset(), False
        if name in chain:  # a cycle: each HyperNode on it holds what the others hold, counted once
            return frozenset(), True
        found: set[str] = set()
        cut = False
        for member in (by_name[name].get("spec") or {}).get("members") or []:
            selector = member.get("selector") or {}
            if member.get("type") == "Node":
                found |= _node_members(selector, nodes)
            elif member.get("type") == "HyperNode":
                below, cycle = resolve((selector.get("exactMatch") or {}).get("name") or "", chain | {name})
                found |= below
                cut |= cycle
        if not cut:
            held[name] = frozenset(found)
        return frozenset(found), cut

    return {name: (int((h.get("spec") or {}).get("tier") or 0), resolve(name, frozenset())[0])
            for name, h in by_name.items()}


def gang_hypernode(held: dict[str, tuple[int, frozenset[str]]], nodes) -> str:
    """Of `held_nodes`' answer, the lowest-tier HyperNode holding every one of `nodes`; '' when none does."""
    holding = [(tier, name) for name, (tier, members) in held.items() if nodes and members >= set(nodes)]
    return min(holding)[1] if holding else ""


def placement(hypernodes: list[dict], nodes: dict[str, dict | None]) -> dict:
    """What the job page shows of a Volcano gang's place: its HyperNode and, where the HyperNode's labels say it,
    the domain ({node label: value}); `spread` when no one HyperNode holds all its nodes, `unmapped` when none
    holds any (Volcano knows nothing of their network). {} before it has nodes."""
    if not nodes:
        return {}
    held = held_nodes(hypernodes, nodes)
    name = gang_hypernode(held, nodes)
    if not name:
        return {"spread": True} if any(members for _, members in held.values()) else {"unmapped": True}
    labels = next(h["metadata"].get("labels") or {} for h in hypernodes if h["metadata"]["name"] == name)
    domain = {key: value for key, value in labels.items() if key != SOURCE_LABEL}
    return {"hypernode": name, "domains": [domain]} if domain else {"hypernode": name}
