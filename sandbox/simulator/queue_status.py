"""The usage a scheduler reports in its queues' status, written only when it changed.

Kueue (kubernetes-sigs/kueue): the ClusterQueue reconciler copies the cache's usage into the status
(pkg/controller/core/clusterqueue_controller.go updateCqStatusIfChanged): `flavorsReservation` and
`flavorsUsage` list every flavor of every resource group with every covered resource, sorted by resource name,
`total` the quota its workloads hold and `borrowed` what exceeds the nominal quota, only for a queue in a cohort
(pkg/cache/scheduler/cache.go Usage, getUsage); `reservingWorkloads`, `admittedWorkloads` and `pendingWorkloads`
count the workloads (apis/kueue/v1beta2/clusterqueue_types.go ClusterQueueStatus, the version served). Without
admission checks a reservation is an admission, so both lists are the same here.

Volcano (volcano-sh/volcano): when a session closes the scheduler sums the requests of each queue's
allocated tasks into its `status.allocated`, adding them to every ancestor up to `root` too, and writes a queue
only when the sum changed (pkg/scheduler/framework/session.go updateQueueStatus); cpu and memory are always listed
(pkg/scheduler/util/scheduler_helper.go ConvertRes2ResList).
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from ..quantity import parse_quantity
from .model import KUEUE, VOLCANO, condition, fmt, set_conditions


def publish(sim, now: float) -> None:
    """Every installed scheduler's queue usage, as its status reports it."""
    kueue, volcano = sim.schedulers.get("kueue"), sim.schedulers.get("volcano")
    if kueue is not None and sim.objects.installed(KUEUE, "ClusterQueue"):
        _kueue_cluster_queues(sim, kueue, now)
    if volcano is not None and sim.objects.installed(VOLCANO, "Queue"):
        _volcano_queues(sim, volcano)


def cluster_queue_usage(spec: dict, used: dict[tuple[str, str], Decimal]) -> list[dict]:
    """`flavorsUsage` of a ClusterQueue with `spec` whose workloads hold `used` per (flavor, resource)."""
    in_cohort = bool(spec.get("cohortName") or spec.get("cohort"))
    usage = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            nominal = {r["name"]: parse_quantity(r.get("nominalQuota", "0")) for r in flavor.get("resources") or []}
            resources = []
            for resource in sorted(group.get("coveredResources") or []):
                total = used.get((flavor["name"], resource), Decimal(0))
                entry = {"name": resource, "total": fmt(total)}
                borrowed = total - nominal.get(resource, Decimal(0))
                if in_cohort and borrowed > 0:
                    entry["borrowed"] = fmt(borrowed)
                resources.append(entry)
            usage.append({"name": flavor["name"], "resources": resources})
    return usage


def cluster_queue_active(spec: dict, flavors: set[str]) -> tuple[bool, str, str]:
    """The ClusterQueue's Active condition (pkg/cache/scheduler/clusterqueue.go inactiveReason): Ready unless it is
    stopped or names a ResourceFlavor that does not exist; the first reason leads, every message is listed."""
    named = [f["name"] for group in spec.get("resourceGroups") or [] for f in group.get("flavors") or []]
    missing = [name for name in named if name not in flavors]
    reasons, messages = [], []
    if spec.get("stopPolicy", "None") != "None":
        reasons.append("Stopped")
        messages.append("is stopped")
    if missing:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
    if not reasons:
        return True, "Ready", "Can admit new workloads"
    return False, reasons[0], f"Can't admit new workloads: {', '.join(messages)}."


def local_queue_active(spec: dict, cluster_queue: dict | None) -> tuple[bool, str, str]:
    """The LocalQueue's Active condition (pkg/controller/core/localqueue_controller.go Reconcile)."""
    if spec.get("stopPolicy", "None") != "None":
        return False, "Stopped", "LocalQueue is stopped"
    if cluster_queue is None:
        return False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
    active = any(c["type"] == "Active" and c["status"] == "True"
                 for c in (cluster_queue.get("status") or {}).get("conditions") or [])
    if not active:
        return False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
    return True, "Ready", "Can submit new workloads to localQueue"


def _active(obj: dict, found: tuple[bool, str, str], now: float) -> dict:
    """The status patch that sets the Active condition, or {} when it already says so."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    old = next((c for c in conditions if c["type"] == "Active"), {})
    status, reason, message = found
    if (old.get("status"), old.get("reason"), old.get("message")) == ("True" if status else "False", reason, message):
        return {}
    update = condition("Active", status, reason, message, now, obj["metadata"].get("generation", 1))
    return {"conditions": set_conditions(conditions, update)}


def _kueue_cluster_queues(sim, kueue, now: float) -> None:
    pending: dict[str, int] = defaultdict(int)
    for lq in sim.objects.list(KUEUE, "LocalQueue"):
        queue_id = f"lq/{lq['metadata']['namespace']}/{lq['metadata']['name']}"
        pending[(lq.get("spec") or {}).get("clusterQueue", "")] += len(sim._pending.get(queue_id) or ())
    flavors = {rf["metadata"]["name"] for rf in sim.objects.list(KUEUE, "ResourceFlavor")}
    cluster_queues = {}
    for cq in sim.objects.list(KUEUE, "ClusterQueue"):
        name = cq["metadata"]["name"]
        spec = cq.get("spec") or {}
        usage = cluster_queue_usage(spec, kueue.usage.get(name) or {})
        admitted = len(kueue.admitted.get(name) or ())
        wanted = {"flavorsReservation": usage, "flavorsUsage": usage, "reservingWorkloads": admitted,
                  "admittedWorkloads": admitted, "pendingWorkloads": pending[name]}
        status = cq.get("status") or {}
        changed = {key: value for key, value in wanted.items() if status.get(key) != value}
        changed |= _active(cq, cluster_queue_active(spec, flavors), now)
        if changed:
            sim.objects.patch_status(KUEUE, "ClusterQueue", None, name, changed)
            cq = {**cq, "status": {**status, **changed}}
        cluster_queues[name] = cq
    for lq in sim.objects.list(KUEUE, "LocalQueue"):
        spec = lq.get("spec") or {}
        patch = _active(lq, local_queue_active(spec, cluster_queues.get(spec.get("clusterQueue", ""))), now)
        if patch:
            sim.objects.patch_status(KUEUE, "LocalQueue", lq["metadata"]["namespace"], lq["metadata"]["name"], patch)


def queue_allocated(parents: dict[str, str], usage: dict[str, dict[str, Decimal]]) -> dict[str, dict[str, str]]:
    """`status.allocated` of every queue (`parents`: queue -> its parent, "" for none): its own tasks' requests and
    those of every queue under it; `root` holds everything."""
    totals: dict[str, dict[str, Decimal]] = {name: defaultdict(Decimal) for name in parents}
    for queue, amounts in usage.items():
        node, seen = queue, set()
        while node in totals and node not in seen:
            seen.add(node)
            for resource, value in amounts.items():
                totals[node][resource] += value
            node = parents[node] or ("root" if node != "root" else "")
    return {name: {"cpu": "0", "memory": "0"} | {k: fmt(v) for k, v in sorted(amounts.items()) if v}
            for name, amounts in totals.items()}


def _volcano_queues(sim, volcano) -> None:
    queues = sim.objects.list(VOLCANO, "Queue")
    parents = {q["metadata"]["name"]: (q.get("spec") or {}).get("parent", "") for q in queues}
    allocated = queue_allocated(parents, volcano.usage)
    for q in queues:
        name = q["metadata"]["name"]
        old = (q.get("status") or {}).get("allocated") or {}
        if old != allocated[name]:  # a merge patch keeps keys it does not name: a resource no longer held is nulled
            sim.objects.patch_status(VOLCANO, "Queue", None, name,
                                     {"allocated": {k: None for k in old} | allocated[name]})
