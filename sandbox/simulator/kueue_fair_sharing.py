"""Kueue's fair sharing, for the order in which the heads of a cohort's ClusterQueues are tried.

A port of kubernetes-sigs/kueue v0.19.2: pkg/cache/scheduler/fair_sharing.go (dominantResourceShare: per resource,
the usage above the node's subtree quota, with the workload's requests added, over what the parent cohort could
lend of that resource, ×1000 and divided by the node's fairSharing.weight; a zero weight that borrows sorts last)
and pkg/scheduler/fair_sharing_iterator.go (the tournament: the entry whose ClusterQueue has the lowest share
after admitting it goes first; before that, FairSharingPrioritizeNonBorrowing (on by default) puts first an entry
whose ClusterQueue would not borrow on the flavors it asks for; ties go to higher priority
(PrioritySortingWithinCohort), then to the first come).

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


def order_key(node: quota_tree.Node, node_weight: Decimal, requests: dict) -> tuple[bool, bool, float]:
    """The tournament's comparison of an entry: (borrows on a flavor it asks for, borrows with a zero weight,
    the weighted share), all after admitting it; lower goes first."""
    if node.parent is None:
        return False, False, 0.0
    borrowed_on = any(requests.get(fr, ZERO) > 0 and requests[fr] + node.usage.get(fr, ZERO) > quota
                      for fr, quota in node.subtree.items())
    return (borrowed_on, *share(node, node_weight, requests))


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
