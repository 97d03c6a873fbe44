"""Kueue's fair sharing, for the order in which the heads of a cohort's ClusterQueues are tried.

A port of kubernetes-sigs/kueue: pkg/cache/scheduler/fair_sharing.go (dominantResourceShare: per resource,
the usage above the node's subtree quota, with the workload's requests added, over what the parent cohort could
lend of that resource, ×1000 and divided by the node's fairSharing.weight; a zero weight that borrows sorts last)
and pkg/scheduler/fair_sharing_iterator.go: the tournament down the cohort tree. Each ClusterQueue's head entry
is compared, at every cohort on its path, by the share of the child of that cohort it comes through, with the
entry's usage added (computeDRS): at its own cohort by its ClusterQueue's share, higher up by its cohort's share
and that cohort's weight. At each cohort the lowest key wins and goes up (runTournament); before the share,
FairSharingPrioritizeNonBorrowing (on by default) puts first an entry whose node would not borrow on the flavors
it asks for; ties go to higher priority (PrioritySortingWithinCohort), then to the first come.

Fair sharing is switched on in Kueue's Configuration (`fairSharing.enable`); the sandbox has no Kueue
Configuration, so it counts as on once any ClusterQueue or Cohort declares `spec.fairSharing`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from decimal import Decimal

from ..quantity import parse_quantity
from . import quota_tree

ZERO = Decimal(0)


def weight(spec: dict) -> Decimal:
    """FairSharing.Weight, a quantity defaulting to 1 (apis/kueue/v1beta2/fairsharing_types.go)."""
    value = (spec.get("fairSharing") or {}).get("weight")
    return Decimal(1) if value is None else parse_quantity(str(value))


def enabled(specs: list[dict]) -> bool:
    return any("fairSharing" in spec for spec in specs)


def lendable(node: quota_tree.Node) -> dict[str, Decimal]:
    """calculateLendable: per resource name, what the node could ever get of each of the root's flavors."""
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for fr in node.root().subtree:
        totals[fr[1]] += quota_tree.potential_available(node, fr)
    return totals


def share(node: quota_tree.Node, node_weight: Decimal, requests: dict) -> tuple[bool, float]:
    """(borrows with a zero weight, the weighted share): what CompareDRS orders by."""
    if node.parent is None:
        return False, 0.0
    borrowed: dict[str, Decimal] = defaultdict(Decimal)
    for fr, quota in node.subtree.items():
        above = requests.get(fr, ZERO) + node.usage.get(fr, ZERO) - quota
        if above > 0:
            borrowed[fr[1]] += above
    if not borrowed:
        return False, 0.0
    can_lend = lendable(node.parent)
    ratio = max((float(amount) * 1000.0 / float(can_lend[name]) for name, amount in borrowed.items()
                 if can_lend.get(name, ZERO) > 0), default=0.0)
    if node_weight == 0:
        return ratio > 0, ratio
    return False, ratio / float(node_weight)


def rounded(node: quota_tree.Node, node_weight: Decimal) -> int:
    """The ClusterQueue status's fairSharing.weightedShare: the share now, rounded up."""
    zero_weight, value = share(node, node_weight, {})
    return 2**63 - 1 if zero_weight else math.ceil(value)


def keys_by_cohort(cq: quota_tree.Node, cq_weight: Decimal, requests: dict, cohort_weights: dict) -> dict:
    """Per cohort on the ClusterQueue's path, the key the entry is compared by there: (borrows on a flavor it asks
    for, borrows with a zero weight, the weighted share) of the cohort's child it comes through, with its usage."""
    added = {fr: value for fr, value in requests.items() if value > 0}
    for fr, value in added.items():
        quota_tree.add_usage(cq, fr, value)
    try:
        keys, child, child_weight = {}, cq, cq_weight
        for cohort in cq.path_to_root():
            borrowing = any(child.usage.get(fr, ZERO) > child.subtree.get(fr, ZERO) for fr in added)
            keys[cohort.name] = (borrowing, *share(child, child_weight, {}))
            child, child_weight = cohort, cohort_weights.get(cohort.name, Decimal(1))
        return keys
    finally:
        for fr, value in added.items():
            quota_tree.remove_usage(cq, fr, value)


def _tournament(cohort: quota_tree.Node, heads: dict[str, int], keys: dict[int, dict]) -> int | None:
    best = None
    for child in cohort.children:
        candidate = heads.get(child.name) if child.is_queue else _tournament(child, heads, keys)
        if candidate is not None and (best is None or (keys[candidate][cohort.name], candidate)
                                      < (keys[best][cohort.name], best)):
            best = candidate
    return best


def next_entry(entries: dict[int, tuple[str, dict]], config: dict) -> int:
    """Which of `entries` (index, lower is higher priority or earlier: (ClusterQueue, requests)) goes next: each
    ClusterQueue's head competes in its root cohort's tournament; a ClusterQueue with no cohort needs none; of
    several roots the winner that came first goes."""
    heads: dict[str, int] = {}
    for index, (cq_name, _) in sorted(entries.items()):
        heads.setdefault(cq_name, index)
    keys = {index: keys_by_cohort(config["nodes"][cq_name], config["cq"][cq_name]["weight"], entries[index][1],
                                  config["cohort_weights"]) for cq_name, index in heads.items()}
    winners = []
    for root in {config["nodes"][cq_name].root() for cq_name in heads}:
        winners.append(heads[root.name] if root.is_queue else _tournament(root, heads, keys))
    return min(w for w in winners if w is not None)
