"""Volcano's proportion plugin deals the cluster out among queues by weight (volcano-sh/volcano
pkg/scheduler/plugins/proportion/proportion.go, OnSessionOpen): each round gives every queue not yet met its
weight's part of what is left, capped at its capability and at what it asks for (allocated plus pending), raised to
its guarantee; a queue is met once it has what it asks for (or stops growing); rounds go on while something is
left. That deal is the queue's deserved share, which the reclaim action takes back to (a queue above it is
overused). `spec.deserved` is the capacity plugin's, not proportion's, so it is used only with capacity.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

ZERO = Decimal(0)


def requests(volcano) -> dict[str, dict[str, Decimal]]:
    """Per queue: what its jobs hold now plus what its waiting jobs ask for."""
    asked: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for queue, usage in volcano.usage.items():
        for resource, value in usage.items():
            asked[queue][resource] += value
    for jobs in volcano.sim._pending.values():
        for job in jobs.values():
            if job.backend == volcano.backend:
                for resource, value in job.total.items():
                    asked[job.queue][resource] += value
    return asked


def deal(volcano, queues: dict, capacity: dict[str, Decimal], plugins: dict) -> None:
    """Replace each leaf queue's deserved with proportion's deal, when proportion (not capacity) is configured."""
    if "proportion" not in plugins or "capacity" in plugins:
        return
    weights = {q["metadata"]["name"]: int((q.get("spec") or {}).get("weight") or 1)
               for q in volcano.objects.list("scheduling.volcano.sh/v1beta1", "Queue")}
    asked = requests(volcano)
    leaves = [name for name, q in queues.items() if q["leaf"] and name != "root"]
    deserved = {name: {} for name in leaves}
    remaining, met = dict(capacity), set()
    while any(v > 0 for v in remaining.values()):
        open_queues = [name for name in leaves if name not in met]
        total_weight = sum(weights.get(name, 1) for name in open_queues)
        if not open_queues or not total_weight:
            break
        handed: dict[str, Decimal] = defaultdict(Decimal)
        for name in open_queues:
            queue, before = queues[name], dict(deserved[name])
            share = Decimal(weights.get(name, 1)) / total_weight
            after = {}
            for resource in set(remaining) | set(before):
                value = before.get(resource, ZERO) + remaining.get(resource, ZERO) * share
                if resource in queue["capability"]:
                    value = min(value, queue["capability"][resource])
                value = min(value, asked[name].get(resource, ZERO))
                after[resource] = max(value, queue["guarantee"].get(resource, ZERO))
                handed[resource] += after[resource] - before.get(resource, ZERO)
            deserved[name] = after
            if after == before or all(asked[name].get(r, ZERO) <= after.get(r, ZERO) for r in asked[name]):
                met.add(name)
        if not any(handed.values()):
            break
        remaining = {r: max(ZERO, v - handed.get(r, ZERO)) for r, v in remaining.items()}
    for name in leaves:
        queues[name]["deserved"] = {r: v for r, v in deserved[name].items() if v}
