"""Volcano's allocate action on Nodes: where each task of a gang goes, and network topology (HyperNodes).

Sources (volcano-sh/volcano):
- HyperNodes group nodes by tier (staging/src/volcano.sh/apis/pkg/apis/topology/v1alpha1/hypernode_types.go): a
  member is a Node (tier 1, chosen by exactMatch name, regexMatch pattern or labelMatch selector) or a HyperNode
  (higher tiers, by exactMatch only: "HyperNode member does not support regex match"); a HyperNode's real nodes
  are its members', and one being deleted holds none (pkg/scheduler/api/hyper_node_info.go BuildHyperNodeCache).
  Above them all the session adds a virtual HyperNode holding every node, one tier above the highest real one
  (tier 1 when there is none: pkg/scheduler/framework/session.go addClusterTopHyperNode).
- The session translates `highestTierName` into a tier through the HyperNodes' `tierName` (left untranslated
  when no HyperNode has that name), and turns mode soft into mode hard up to the virtual top's tier
  (session.go adjustNetworkTopologySpec, translateHighestTierNameToAllowed, convertSoftToHardTopology).
- So a job in mode hard with a tier (soft included) keeps the whole gang within one HyperNode of a tier no higher
  than that (pkg/scheduler/actions/allocate/allocate.go allocateForJob; plugins/network-topology-aware
  hyperNodeGradientFn): the eligible HyperNodes (tier allowed, idle resources at least the job's minResources)
  are tried tier by tier from the lowest; in the first tier where some HyperNode can hold the gang, the one with
  the best bin-packing score is taken (HyperNodeOrderFn: (used + request) / allocatable of cpu and memory, the
  default hypernode.binpack resources). None: the job is not allocated, and gang reports it unschedulable.
  Nothing is written about the choice: the scheduler keeps it in memory and recovers it from the pods' nodes
  (session.go recoverAllocatedHyperNode).
- Within the chosen HyperNode, or anywhere for mode hard with no tier, nodes closest to the job's placed pods
  come first (networkTopologyAwareScore: the lower the tier of their lowest common HyperNode, the better).
- A node's free room is its allocatable less what the pods bound to it request, the simulator's own and any other
  pod bound there by hand (one with no owner, not finished), as the scheduler's cache counts every pod on a node.
- Nodes are otherwise chosen as the predicates plugin filters them (requests within what is free, NoSchedule and
  NoExecute taints tolerated, nodeSelector matched); among those, the sandbox packs by GPUs, the node left with
  the fewest free first (upstream's binpack plugin weighs cpu and memory unless `binpack.resources` names the GPU).
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import re2

from ..quantity import parse_quantity
from ..selectors import matches_label_selector
from ..structural import re2_search
from .kueue_tas import tolerates
from .model import pod_requests

TOPOLOGY = "topology.volcano.sh/v1alpha1"
TOP = "<cluster-top-hypernode>"  # pkg/scheduler/framework/session.go ClusterTopHyperNode
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
            "taints": (node.get("spec") or {}).get("taints") or [], "held": {}}
    if not nodes:
        return {}
    for pod in objects.list("v1", "Pod"):
        bound = nodes.get((pod.get("spec") or {}).get("nodeName"))
        if bound is not None and not pod["metadata"].get("ownerReferences") and (
                (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")):
            for k, v in pod_requests(pod).items():
                bound["held"][k] = bound["held"].get(k, Decimal(0)) + v
    found = objects.list(TOPOLOGY, "HyperNode") if objects.installed(TOPOLOGY, "HyperNode") else []
    hyper = hypernodes(found, nodes)
    tier_names = {info["tier_name"]: info["tier"] for info in hyper.values() if info["tier_name"]}
    hyper[TOP] = {"tier": max((info["tier"] for info in hyper.values()), default=0) + 1, "labels": {},
                  "nodes": frozenset(nodes), "tier_name": ""}
    return {"nodes": nodes, "hypernodes": hyper, "tier_names": tier_names}


def _selected(selector: dict, name: str, labels: dict) -> bool:
    """Whether a Node member's selector chooses this node (HyperNode members are chosen by exact name only)."""
    if "exactMatch" in selector:
        return (selector["exactMatch"] or {}).get("name") == name
    if "regexMatch" in selector:  # Go's regexp (RE2), unanchored as regexp.MatchString
        try:
            return re2_search((selector["regexMatch"] or {}).get("pattern") or "", name)
        except re2.error:
            return False
    if "labelMatch" in selector:
        return _label_match(selector["labelMatch"] or {}, labels)
    return False


def _label_match(selector: dict, labels: dict) -> bool:
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return False  # an empty selector matches no node here, as upstream's member resolution treats it
    return matches_label_selector(selector, labels)


def _child(member: dict) -> str:
    """The HyperNode a member names ('' for a Node member): by exact name only."""
    if member.get("type") != "HyperNode":
        return ""
    return ((member.get("selector") or {}).get("exactMatch") or {}).get("name") or ""


def hypernodes(objects: list[dict], nodes: dict) -> dict[str, dict]:
    """Per HyperNode: tier, tierName, labels and the set of real nodes under it."""
    found = {h["metadata"]["name"]: {"tier": int((h.get("spec") or {}).get("tier") or 0),
                                     "tier_name": (h.get("spec") or {}).get("tierName") or "",
                                     "labels": h["metadata"].get("labels") or {},
                                     "members": [] if h["metadata"].get("deletionTimestamp")
                                     else (h.get("spec") or {}).get("members") or []}
             for h in objects}
    children = {name: [_child(member) for member in info["members"] if _child(member) in found]
                for name, info in found.items()}

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
    node = cluster["nodes"][name]
    return {k: v - used.get(name, {}).get(k, Decimal(0)) - node["held"].get(k, Decimal(0))
            for k, v in node["allocatable"].items()}


def highest_tier(cluster: dict, topology: dict) -> int | None:
    """The tier a job's gang must keep within, as the session adjusts its networkTopology: None for no limit."""
    if not topology:
        return None
    if topology.get("mode") == "soft":
        return cluster["hypernodes"][TOP]["tier"]
    highest = topology.get("highestTierAllowed")
    if highest is None and topology.get("highestTierName"):
        highest = cluster["tier_names"].get(topology["highestTierName"])
    return highest


def place(cluster: dict, used: dict, pods: list, minimum: int, topology: dict) -> list[str]:
    """Nodes for as many of `pods` (in order) as fit. With a tier to keep within: [] when no HyperNode allowed
    holds `minimum` pods."""
    hyper = cluster["hypernodes"] if topology else None
    highest = highest_tier(cluster, topology)
    if highest is None:
        return _place_within(cluster, used, pods, set(cluster["nodes"]), hyper)
    for tier in sorted({info["tier"] for info in cluster["hypernodes"].values() if info["tier"] <= highest}):
        candidates = []
        for name, info in sorted(cluster["hypernodes"].items()):
            if info["tier"] != tier or not _idle_enough(cluster, used, info["nodes"], pods[:minimum]):
                continue
            chosen = _place_within(cluster, used, pods, info["nodes"], hyper)
            if len(chosen) >= minimum:
                candidates.append((-_binpack(cluster, used, info["nodes"], pods), name, chosen))
        if candidates:
            return min(candidates)[2]
    return []


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
