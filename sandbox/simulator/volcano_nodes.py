"""Volcano's allocate action on Nodes: where each task of a gang goes, and network topology (HyperNodes).

Sources (volcano-sh/volcano v1.15.1):
- HyperNodes group nodes by tier (staging/src/volcano.sh/apis/pkg/apis/topology/v1alpha1/hypernode_types.go): a
  member is a Node (tier 1, chosen by exactMatch name, regexMatch pattern or labelMatch selector) or a HyperNode
  (higher tiers, by exactMatch or regexMatch); a HyperNode's real nodes are its members' (pkg/scheduler/api/
  hyper_node_info.go).
- A job with networkTopology mode hard keeps the whole gang within one HyperNode of a tier no higher than
  highestTierAllowed (pkg/scheduler/actions/allocate/allocate.go allocateForJob; plugins/network-topology-aware
  hyperNodeGradientFn): the eligible HyperNodes (tier allowed, idle resources at least the job's minResources) are
  tried tier by tier from the lowest; in the first tier where some HyperNode can hold the gang, the one with the
  best bin-packing score is taken (HyperNodeOrderFn: (used + request) / allocatable of cpu and memory, the default
  hypernode.binpack resources). None: the job is not allocated, and gang reports it unschedulable. The choice is
  recorded on the PodGroup as the annotation volcano.sh/job-allocated-hypernode.
- Mode soft (or no highestTierAllowed) is normal allocation with the plugin's node score: after the first task,
  nodes whose lowest common HyperNode with the job's nodes is of a lower tier score higher
  (networkTopologyAwareScore), so the gang packs close together and spreads only when it must.
- Nodes are otherwise chosen as the predicates plugin filters them (requests within what is free, NoSchedule and
  NoExecute taints tolerated, nodeSelector matched); among those, the sandbox packs by GPUs, the node left with
  the fewest free first (upstream's binpack plugin weighs cpu and memory unless `binpack.resources` names the GPU).
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import re2

from ..quantity import parse_quantity
from ..structural import re2_search
from .kueue_tas import tolerates

TOPOLOGY = "topology.volcano.sh/v1alpha1"
ALLOCATED_ANNOTATION = "volcano.sh/job-allocated-hypernode"  # pkg/scheduler/api/well_known_labels.go
BINPACK_RESOURCES = ("cpu", "memory")  # network-topology-aware's default hypernode.binpack weights


def snapshot(objects) -> dict:
    """The cluster's Nodes (labels, allocatable, taints) and HyperNodes (tier, real nodes, labels), or {} when no
    Node is registered (the sandbox then counts the queues' promises, not nodes)."""
    nodes = {}
    for node in objects.list("v1", "Node"):
        status = node.get("status") or {}
        allocatable = status.get("allocatable") or status.get("capacity") or {}
        nodes[node["metadata"]["name"]] = {
            "labels": node["metadata"].get("labels") or {},
            "allocatable": {k: parse_quantity(v) for k, v in allocatable.items()},
            "taints": (node.get("spec") or {}).get("taints") or []}
    if not nodes:
        return {}
    found = objects.list(TOPOLOGY, "HyperNode") if objects.installed(TOPOLOGY, "HyperNode") else []
    return {"nodes": nodes, "hypernodes": hypernodes(found, nodes)}


def _selected(selector: dict, name: str, labels: dict | None) -> bool:
    if "exactMatch" in selector:
        return (selector["exactMatch"] or {}).get("name") == name
    if "regexMatch" in selector:  # Go's regexp (RE2), unanchored as regexp.MatchString
        try:
            return re2_search((selector["regexMatch"] or {}).get("pattern") or "", name)
        except re2.error:
            return False
    if "labelMatch" in selector and labels is not None:  # labelMatch only takes effect for Node members
        return _label_match(selector["labelMatch"] or {}, labels)
    return False


def _label_match(selector: dict, labels: dict) -> bool:
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return False  # an empty selector matches no node here, as upstream's member resolution treats it
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, op, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def hypernodes(objects: list[dict], nodes: dict) -> dict[str, dict]:
    """Per HyperNode: tier, labels, parent and the set of real nodes under it."""
    found = {h["metadata"]["name"]: {"tier": int((h.get("spec") or {}).get("tier") or 0),
                                     "labels": h["metadata"].get("labels") or {},
                                     "members": (h.get("spec") or {}).get("members") or [], "parent": ""}
             for h in objects}
    children: dict[str, list[str]] = defaultdict(list)
    for name, info in found.items():
        for member in info["members"]:
            selector = member.get("selector") or {}
            if member.get("type") == "HyperNode":
                for child in found:
                    if child != name and _selected(selector, child, None):
                        children[name].append(child)
                        found[child]["parent"] = name

    def real(name: str, seen: frozenset) -> frozenset:
        if name in seen:
            return frozenset()
        direct = {n for member in found[name]["members"] if member.get("type") == "Node"
                  for n, node in nodes.items() if _selected(member.get("selector") or {}, n, node["labels"])}
        return frozenset(direct).union(*(real(c, seen | {name}) for c in children[name]))

    for name, info in found.items():
        info["nodes"] = real(name, frozenset())
    return found


def _lca_tier(hyper: dict, a: str, b: str) -> int:
    """The tier of the lowest HyperNode holding both nodes; a large number when none does."""
    tiers = [info["tier"] for info in hyper.values() if a in info["nodes"] and b in info["nodes"]]
    return min(tiers, default=1 << 20)


def _fits(pod, node: dict, free: dict) -> bool:
    spec = pod.template.get("spec") or {}
    if any(node["labels"].get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    tolerations = spec.get("tolerations") or []
    if any(t.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(tol, t) for tol in tolerations)
           for t in node["taints"]):
        return False
    # DRA devices (`deviceclass/<class>`, as the sandbox counts a claim for Volcano) are allocated from
    # ResourceSlices by the DRA plugin, not from a node's allocatable.
    return all(v <= free.get(k, Decimal(0)) for k, v in pod.requests.items() if v and not k.startswith("deviceclass/"))


def _free(cluster: dict, used: dict, name: str) -> dict:
    return {k: v - used.get(name, {}).get(k, Decimal(0)) for k, v in cluster["nodes"][name]["allocatable"].items()}


def place(cluster: dict, used: dict, pods: list, minimum: int, topology: dict) -> tuple[list[str], str]:
    """Nodes for as many of `pods` (in order) as fit, and the gang's HyperNode ('' unless hard mode). Hard mode:
    [] when no allowed HyperNode holds `minimum` pods."""
    highest = topology.get("highestTierAllowed")
    if topology.get("mode") == "hard" and highest is not None:
        for tier in sorted({info["tier"] for info in cluster["hypernodes"].values() if info["tier"] <= highest}):
            candidates = []
            for name, info in sorted(cluster["hypernodes"].items()):
                if info["tier"] != tier or not _idle_enough(cluster, used, info["nodes"], pods[:minimum]):
                    continue
                chosen = _place_within(cluster, used, pods, info["nodes"], None)
                if len(chosen) >= minimum:
                    candidates.append((-_binpack(cluster, used, info["nodes"], pods), name, chosen))
            if candidates:
                _, name, chosen = min(candidates)
                return chosen, name
        return [], ""
    return _place_within(cluster, used, pods, set(cluster["nodes"]), cluster["hypernodes"] if topology else None), ""


def _idle_enough(cluster: dict, used: dict, members, pods) -> bool:
    need: dict[str, Decimal] = defaultdict(Decimal)
    for pod in pods:
        for k, v in pod.requests.items():
            need[k] += 0 if k.startswith("deviceclass/") else v
    idle: dict[str, Decimal] = defaultdict(Decimal)
    for name in members:
        for k, v in _free(cluster, used, name).items():
            idle[k] += v
    return all(v <= idle.get(k, Decimal(0)) for k, v in need.items() if v)


def _binpack(cluster: dict, used: dict, members, pods) -> float:
    """HyperNodeOrderFn: the mean over the bin-packing resources of (used + request) / allocatable."""
    scores = []
    for resource in BINPACK_RESOURCES:
        request = sum((p.requests.get(resource, Decimal(0)) for p in pods), Decimal(0))
        allocatable = sum((cluster["nodes"][n]["allocatable"].get(resource, Decimal(0)) for n in members), Decimal(0))
        taken = sum((used.get(n, {}).get(resource, Decimal(0)) for n in members), Decimal(0))
        if request and allocatable:
            scores.append(float((taken + request) / allocatable))
    return sum(scores) / len(scores) if scores else 0.0


def _place_within(cluster: dict, used: dict, pods: list, members, hyper: dict | None) -> list[str]:
    """Pod by pod, the node binpack prefers among those that fit (with soft topology, the nodes closest to the
    job's placed pods first); stops at the first pod that fits nowhere, as gang allocation does."""
    taken: dict[str, dict] = defaultdict(lambda: defaultdict(Decimal))
    chosen: list[str] = []
    for pod in pods:
        best = None
        for name in sorted(members):
            free = {k: v - taken[name][k] for k, v in _free(cluster, used, name).items()}
            if not _fits(pod, cluster["nodes"][name], free):
                continue
            closeness = min((_lca_tier(hyper, name, other) for other in chosen), default=0) if hyper else 0
            gpu_left = free.get("nvidia.com/gpu", Decimal(0)) - pod.requests.get("nvidia.com/gpu", Decimal(0))
            key = (closeness, gpu_left, name)
            if best is None or key < best:
                best = key
        if best is None:
            break
        chosen.append(best[2])
        for k, v in pod.requests.items():
            taken[best[2]][k] += v
    return chosen


def charge(used: dict, nodes: list[str], pods: list, sign: int) -> None:
    for name, pod in zip(nodes, pods, strict=False):
        for k, v in pod.requests.items():
            used.setdefault(name, defaultdict(Decimal))[k] += sign * v
