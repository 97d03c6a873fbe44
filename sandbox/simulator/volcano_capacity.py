"""The capacity plugin's bound on each queue, its real capability (volcano-sh/volcano pkg/scheduler/plugins/capacity
capacity.go): what a queue may hold is its capability, and at most the room its siblings' guarantees leave it.

- Flat (buildQueueAttrs): the cluster less every queue's guarantee, plus the queue's own, capped by its capability
  (a CPU or memory capability of zero or less does not cap).
- Hierarchical (`enableHierarchy`, checkHierarchicalQueue): `root` holds the cluster; each child holds its parent's
  real capability less all its siblings' guarantees (its own included), plus its own guarantee, capped by its
  capability, which takes from its parent's each resource it does not name (CPU and memory also when zero).

A queue's allocation is checked against its own real capability and, hierarchically, every ancestor's.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

ZERO = Decimal(0)
ROOT = "root"
_INHERITED_WHEN_ZERO = ("cpu", "memory")


def real_capabilities(queues: dict, cluster: dict[str, Decimal], *, hierarchy: bool) -> dict[str, dict]:
    """Per queue name, its real capability, resource by resource."""
    if not hierarchy:
        guarantees: dict[str, Decimal] = defaultdict(Decimal)
        for queue in queues.values():
            for k, v in queue["guarantee"].items():
                guarantees[k] += v
        return {name: _capped(_room(cluster, guarantees, queue["guarantee"]),
                              {k: v for k, v in queue["capability"].items()
                               if v > 0 or k not in _INHERITED_WHEN_ZERO})
                for name, queue in queues.items()}
    children: dict[str, list[str]] = defaultdict(list)
    for name, queue in queues.items():
        if name != ROOT:
            children[queue["parent"] or ROOT].append(name)
    root = queues.get(ROOT) or {"capability": {}}
    real = {ROOT: dict(cluster)}
    capability = {ROOT: dict(root["capability"] or cluster)}
    pending, seen = [ROOT], {ROOT}
    while pending:
        parent = pending.pop()
        below = [c for c in children.get(parent, []) if c not in seen]
        guarantees = defaultdict(Decimal)
        for child in below:
            for k, v in queues[child]["guarantee"].items():
                guarantees[k] += v
        for child in below:
            own = queues[child]["capability"]
            capability[child] = {**capability[parent], **{k: v for k, v in own.items()
                                                         if v > 0 or k not in _INHERITED_WHEN_ZERO}}
            real[child] = _capped(_room(real[parent], guarantees, queues[child]["guarantee"]), capability[child])
            seen.add(child)
            pending.append(child)
    return real


def _room(total: dict, guarantees: dict, guarantee: dict) -> dict[str, Decimal]:
    """api.ExceededPart(total, guarantees).Add(guarantee)."""
    room = {k: max(ZERO, v - guarantees.get(k, ZERO)) for k, v in total.items()}
    for k, v in guarantee.items():
        room[k] = room.get(k, ZERO) + v
    return room


def _capped(room: dict, capability: dict) -> dict[str, Decimal]:
    """MinDimensionResource(capability, Infinity): a resource the capability does not name is not capped by it."""
    return {**{k: v for k, v in capability.items() if k not in room},
            **{k: min(v, capability[k]) if k in capability else v for k, v in room.items()}}
