"""Volcano's preempt and reclaim actions, for `volcano.Volcano` (volcano pkg/scheduler/actions/preempt and
actions/reclaim): which running tasks may give way to a waiting gang, and taking them.

Which tasks may go is decided tier by tier as Session.Preemptable/Reclaimable do (framework/session_plugins.go):
the plugins of a tier that have a say (enablePreemptable / enableReclaimable not false) intersect their choices,
and the first tier with a non-empty answer decides. Victims are then taken as Session.BuildVictimsPriorityQueue
orders them (the job order reversed: lowest priority, then the newest created, first; a job's pods last first),
preempt's before reclaim's and, with Nodes registered, reclaim's node by node (the simulator from the first node,
upstream from wherever its rotating, parallel predicate pass puts first), until the preemptor's gang can be placed.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from . import volcano_nodes
from .model import VOLCANO, Tracked


def victims(scheduler, job: Tracked, config: dict) -> list[tuple[Tracked, int]]:
    """The preempt action (tasks of the same queue) and the reclaim action (tasks of other, reclaimable queues),
    each only when configured. Answers (job, how many of its pods go)."""
    chosen: dict[tuple, int] = {}
    order = []
    nodes = {name: rank for rank, name in enumerate((config["cluster"] or {}).get("nodes") or {})}
    for action, same in (("preempt", True), ("reclaim", False)):
        if action not in config["actions"] or (action == "reclaim" and not _preemptive(scheduler, job, config)):
            continue
        tasks = [(other, i) for queue, jobs in scheduler.running.items() if (queue == job.queue) == same
                 for other in jobs.values() if other is not job
                 and (same or config["queues"].get(queue, {}).get("reclaimable", True))
                 for i in range(other.limit or 0)]
        # The preempt action runs before reclaim. Reclaim asks the plugins about the tasks of one node at a time
        # and takes victims on the first node that has some (reclaim.go reclaimForTask): whichever job runs there,
        # not the newest. Upstream starts where its last predicate pass stopped and checks nodes in parallel
        # (util/predicate_helper.go), so its first node varies; the simulator starts from the first.
        by_node: dict[int, list] = defaultdict(list)
        for task in tasks:
            other, index = task
            by_node[0 if same else nodes.get(other.nodes[index] if index < len(other.nodes) else "", 0)].append(task)
        for rank in sorted(by_node):
            order.extend(sorted(_allowed(scheduler, action, job, by_node[rank], config),
                                key=lambda t: (t[0].priority, -t[0].seq, -t[1])))
    saved = {q: dict(u) for q, u in scheduler.usage.items()}
    saved_nodes = {n: dict(u) for n, u in scheduler.node_used.items()}
    try:
        for other, index in order:
            pod_set = scheduler.pods_of(other)[index]
            for k, v in pod_set.requests.items():
                scheduler.usage[other.queue][k] -= v
            volcano_nodes.charge(scheduler.node_used, other.nodes[index:index + 1], [pod_set], -1)
            chosen[other.key] = chosen.get(other.key, 0) + 1
            if scheduler.plan(job, config)[0] >= scheduler.min_count(job):
                found = {o.key: o for o, _ in order}
                return [(found[key], count) for key, count in chosen.items()]
    finally:
        for queue, usage in saved.items():
            scheduler.usage[queue] = defaultdict(Decimal, usage)
        scheduler.node_used.clear()
        scheduler.node_used.update({n: defaultdict(Decimal, u) for n, u in saved_nodes.items()})
    return []


def _preemptive(scheduler, job: Tracked, config: dict) -> bool:
    """Whether the job's queue may reclaim for it (Session.Preemptive; capacity.go preemptiveFn, asked task by task
    as the gang's tasks are pipelined): what the queue holds plus the gang's minimum stays within its deserved share
    on some resource the job asks for, and within its capability. Without the capacity plugin, proportion's
    Session.Overused: a queue holding its deserved share in every resource reclaims nothing."""
    mine, held = config["queues"][job.queue], scheduler.usage[job.queue]
    if "capacity" not in config["plugins"]:
        return not (bool(mine["deserved"]) and all(held.get(k, 0) >= v for k, v in mine["deserved"].items() if v))
    need = {k: v for k, v in scheduler.min_resources(job).items() if v}
    if any(scheduler._allocated(name, config).get(k, 0) + v > bound[k]
           for name, bound in scheduler._limits(job.queue, config) for k, v in need.items() if k in bound):
        return False
    return any(held.get(k, 0) + v <= mine["deserved"][k] for k, v in need.items() if mine["deserved"].get(k))


def _allowed(scheduler, action: str, preemptor: Tracked, tasks: list, config: dict) -> list:
    flag = "enablePreemptable" if action == "preempt" else "enableReclaimable"
    for tier in config["tiers"]:
        found = None
        for plugin in tier.get("plugins") or []:
            if plugin.get(flag) is False:
                continue
            fn = PLUGIN_FNS[action].get(plugin.get("name"))
            if fn is None:
                continue
            candidates = fn(scheduler, preemptor, tasks, config)
            if not candidates:
                found = None
                break
            found = candidates if found is None else [t for t in found if t in candidates]
        if found:
            return found
    return []


def _by_priority(scheduler, preemptor, tasks, config):
    """priority.go preemptableFn: tasks of jobs with a lower priority."""
    return [t for t in tasks if t[0].priority < preemptor.priority]


def _gang(scheduler, preemptor, tasks, config):
    """gang.go preemptableFn: a job gives up pods only while it keeps more than minAvailable running."""
    left, found = {}, []
    for other, index in sorted(tasks, key=lambda t: -t[1]):
        left.setdefault(other.key, other.limit or 0)
        if left[other.key] > scheduler.min_count(other):
            left[other.key] -= 1
            found.append((other, index))
    return found


def _overused(scheduler, preemptor, tasks, config):
    """proportion reclaimableFn: tasks of queues allocated above their deserved share."""
    return [t for t in tasks if any(scheduler.usage[t[0].queue].get(k, 0) > v for k, v in
                                    config["queues"].get(t[0].queue, {}).get("deserved", {}).items())]


def _above_deserved(scheduler, preemptor, tasks, config):
    """capacity.go reclaimableFn, victims in order (lowest priority, newest created first): a task may go while its
    queue, less the tasks already chosen, holds more than its deserved share in a resource the task uses and,
    without it, still holds its guarantee (checkGuaranteeConstraint). A queue is never taken below its guarantee, so two
    queues cannot take the same capacity back and forth."""
    held: dict[str, dict] = {}
    found = []
    for other, index in sorted(tasks, key=lambda t: (t[0].priority, -t[0].seq, -t[1])):
        queue = config["queues"].get(other.queue, {})
        allocated = held.setdefault(other.queue, dict(scheduler.usage[other.queue]))
        asks = {k: v for k, v in scheduler.pods_of(other)[index].requests.items() if v}
        if any(allocated.get(k, 0) - asks.get(k, 0) < v for k, v in queue.get("guarantee", {}).items() if v):
            continue
        if not any(allocated.get(k, 0) > queue.get("deserved", {}).get(k, 0) for k in asks):
            continue
        for k, v in asks.items():
            allocated[k] = allocated.get(k, 0) - v
        found.append((other, index))
    return found


def _everyone(scheduler, preemptor, tasks, config):
    """conformance.go evictableFn: any task but the cluster's critical pods (none here)."""
    return list(tasks)


def shrink(scheduler, victim: Tracked, count: int, now: float, preemptor: Tracked) -> None:
    """Evict `count` of the victim's pods, newest first, with the Events the scheduler's cache writes (`evict_events`).
    A job left below its gang minimum is evicted whole (Volcano's job controller restarts it: its PodEvicted
    policy)."""
    keep = (victim.limit or 0) - count
    action = "preempt" if victim.queue == preemptor.queue else "reclaim"
    whole = keep < scheduler.min_count(victim)
    evict_events(scheduler.objects, victim, victim.pods if whole else victim.pods[keep:], action, now)
    if whole:
        return scheduler.sim.evict(victim, now, f"Evicted by {action} to schedule {preemptor.namespace}/"
                                                f"{preemptor.name}")
    scheduler.charge(victim, -1)
    for pod in victim.pods[keep:]:
        scheduler.objects.delete("v1", "Pod", victim.namespace, pod)
    victim.pods, victim.limit, victim.nodes = victim.pods[:keep], keep, victim.nodes[:keep]
    scheduler.charge(victim, +1)
    return None


PLUGIN_FNS = {"preempt": {"priority": _by_priority, "gang": _gang, "conformance": _everyone},
              "reclaim": {"gang": _gang, "conformance": _everyone, "proportion": _overused,
                          "capacity": _above_deserved}}


def evict_events(objects, victim: Tracked, pods: list[str], action: str, now: float) -> None:
    """pkg/scheduler/cache/cache.go: for each pod evicted, defaultEvictor.Evict records a Warning Event `Evict`
    "Pod is evicted, because of <action>" on the pod, and SchedulerCache.Evict a Normal Event `Evict` whose message
    is the action alone on the job's PodGroup (one here: the recorder folds the same Event into one). Neither names
    the job the room is made for."""
    for name in [p for p in pods if p]:
        pod = objects.get("v1", "Pod", victim.namespace, name) or {}
        objects.event({"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": victim.namespace,
                       "uid": (pod.get("metadata") or {}).get("uid", "")}, "Evict",
                      f"Pod is evicted, because of {action}", now, "volcano", "Warning")
    objects.event({"apiVersion": VOLCANO, "kind": "PodGroup", "name": victim.scheduler_object,
                   "namespace": victim.namespace, "uid": victim.scheduler_uid}, "Evict", action, now, "volcano")
