"""Kueue's quota tree: ClusterQueues under (hierarchical) Cohorts, each node holding nominal quota, borrowing and
lending limits per (flavor, resource), its subtree's quota and its usage.

A port of the arithmetic in pkg/cache/scheduler/resource_node.go (Kueue): a node's subtree quota is its
own nominal quota plus what its children lend up (their subtree quota minus what lendingLimit keeps local); usage
counts against a node's local quota first and bubbles up past it; `available` is what a ClusterQueue may take now,
through its ancestors, capped by each borrowingLimit on the way; `potential_available` the same with no usage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from ..quantity import parse_quantity

ZERO = Decimal(0)


@dataclass
class Quota:
    nominal: Decimal = ZERO
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None


def quota_from(resource: dict) -> Quota:
    """A ClusterQueue's or Cohort's resource entry: nominalQuota, borrowingLimit, lendingLimit."""
    def amount(name):
        value = resource.get(name)
        return None if value is None else parse_quantity(value)

    return Quota(amount("nominalQuota") or ZERO, amount("borrowingLimit"), amount("lendingLimit"))


@dataclass(eq=False)
class Node:
    name: str
    is_queue: bool
    quotas: dict[tuple[str, str], Quota] = field(default_factory=dict)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    subtree: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    usage: dict[tuple[str, str], Decimal] = field(default_factory=dict)

    def path_to_root(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def path(self) -> str:
        """buildCQPath in pkg/scheduler/preemption/preemption.go: `/root/.../name`."""
        names = [self.name, *(n.name for n in self.path_to_root())]
        return "/" + "/".join(reversed(names))

    def queues(self):
        """Every ClusterQueue in this subtree (SubtreeClusterQueues)."""
        for child in self.children:
            if child.is_queue:
                yield child
            else:
                yield from child.queues()


def local_quota(node: Node, fr) -> Decimal:
    limit = node.quotas.get(fr, Quota()).lending_limit
    return max(ZERO, node.subtree.get(fr, ZERO) - limit) if limit is not None else ZERO


def local_available(node: Node, fr) -> Decimal:
    return max(ZERO, local_quota(node, fr) - node.usage.get(fr, ZERO))


def available(node: Node, fr) -> Decimal:
    if node.parent is None:
        return node.subtree.get(fr, ZERO) - node.usage.get(fr, ZERO)
    parent_available = available(node.parent, fr)
    limit = node.quotas.get(fr, Quota()).borrowing_limit
    if limit is not None:
        lq = local_quota(node, fr)
        stored_in_parent = node.subtree.get(fr, ZERO) - lq
        used_in_parent = max(ZERO, node.usage.get(fr, ZERO) - lq)
        parent_available = min(stored_in_parent - used_in_parent + limit, parent_available)
    return local_available(node, fr) + parent_available


def potential_available(node: Node, fr) -> Decimal:
    if node.parent is None:
        return node.subtree.get(fr, ZERO)
    value = local_quota(node, fr) + potential_available(node.parent, fr)
    limit = node.quotas.get(fr, Quota()).borrowing_limit
    if limit is not None:
        value = min(node.subtree.get(fr, ZERO) + limit, value)
    return value


def add_usage(node: Node, fr, value: Decimal) -> None:
    free_locally = local_available(node, fr)
    node.usage[fr] = node.usage.get(fr, ZERO) + value
    if node.parent is not None and value > free_locally:
        add_usage(node.parent, fr, value - free_locally)


def remove_usage(node: Node, fr, value: Decimal) -> None:
    stored_in_parent = node.usage.get(fr, ZERO) - local_quota(node, fr)
    node.usage[fr] = node.usage.get(fr, ZERO) - value
    if stored_in_parent <= 0 or node.parent is None:
        return
    remove_usage(node.parent, fr, min(value, stored_in_parent))


def borrowing_with(node: Node, fr, value: Decimal) -> bool:
    return node.usage.get(fr, ZERO) + value > node.subtree.get(fr, ZERO)


def within_nominal(node: Node, frs) -> bool:
    """IsWithinNominalInResources."""
    return all(node.subtree.get(fr, ZERO) >= node.usage.get(fr, ZERO) for fr in frs)


def fit_in_quota(node: Node, requests: dict) -> tuple[bool, dict]:
    """QuantitiesFitInQuota: whether `requests` fit in this node's subtree, and what exceeds its local quota."""
    fits, remaining = True, {}
    for fr, value in requests.items():
        if node.subtree.get(fr, ZERO) < node.usage.get(fr, ZERO) + value:
            fits = False
        remaining[fr] = max(ZERO, value - local_available(node, fr))
    return fits, remaining


def may_reclaim_in_hierarchy(queue: Node, fr, value: Decimal) -> bool:
    """The second result of FindHeightOfLowestSubtreeThatFits (pkg/scheduler/preemption/classical/
    hierarchical_preemption.go): whether some ancestor below the root would hold the request without borrowing."""
    if not borrowing_with(queue, fr, value) or queue.parent is None:
        return queue.parent is not None
    remaining = value - local_available(queue, fr)
    for node in queue.path_to_root():
        if not borrowing_with(node, fr, remaining):
            return node.parent is not None
        remaining -= local_available(node, fr)
    return False


def build(queues: dict[str, dict], cohorts: dict[str, dict]) -> dict[str, Node]:
    """Nodes for every ClusterQueue (`{name: {"cohort": str, "quotas": {fr: Quota}}}`) and Cohort
    (`{name: {"parent": str, "quotas": {...}}}`); a cohort named only by its members exists with no quota."""
    nodes: dict[str, Node] = {}
    cohort_nodes: dict[str, Node] = {}

    def cohort(name: str, seen=()) -> Node:
        if name in cohort_nodes:
            return cohort_nodes[name]
        spec = cohorts.get(name, {})
        node = cohort_nodes[name] = Node(name, False, dict(spec.get("quotas") or {}))
        parent = spec.get("parent")
        if parent and parent not in seen and parent != name:  # a cycle leaves the tree cut where it closes
            node.parent = cohort(parent, (*seen, name))
            node.parent.children.append(node)
        return node

    for name in cohorts:
        cohort(name)
    for name, spec in queues.items():
        node = nodes[name] = Node(name, True, dict(spec["quotas"]))
        if spec.get("cohort"):
            node.parent = cohort(spec["cohort"])
            node.parent.children.append(node)
    for node in {n.root() for n in [*nodes.values(), *cohort_nodes.values()]}:
        _accumulate(node)
    return nodes


def _accumulate(node: Node) -> None:
    node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
    for child in node.children:
        _accumulate(child)
        for fr, value in child.subtree.items():
            node.subtree[fr] = node.subtree.get(fr, ZERO) + value - local_quota(child, fr)
