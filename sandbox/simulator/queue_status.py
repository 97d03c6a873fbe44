"""The usage a scheduler reports in its queues' status, written only when it changed.

Kueue (kubernetes-sigs/kueue v0.19.2): the ClusterQueue reconciler copies the cache's usage into the status
(pkg/controller/core/clusterqueue_controller.go updateCqStatusIfChanged): `flavorsReservation` and
`flavorsUsage` list every flavor of every resource group with every covered resource, sorted by resource name,
`total` the quota its workloads hold and `borrowed` what exceeds the nominal quota, only for a queue in a cohort
(pkg/cache/scheduler/cache.go Usage, getUsage); `reservingWorkloads`, `admittedWorkloads` and `pendingWorkloads`
count the workloads (apis/kueue/v1beta2/clusterqueue_types.go ClusterQueueStatus, the version served). Without
admission checks a reservation is an admission, so both lists are the same here.

Volcano (volcano-sh/volcano v1.15.1): when a session closes the scheduler sums the requests of each queue's
allocated tasks into its `status.allocated`, adding them to every ancestor up to `root` too, and writes a queue
only when the sum changed (pkg/scheduler/framework/session.go updateQueueStatus); cpu and memory are always listed
(pkg/scheduler/util/scheduler_helper.go ConvertRes2ResList).
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from ..quantity import parse_quantity
from .model import KUEUE, VOLCANO, fmt


def publish(sim) -> None:
    """Every installed scheduler's queue usage, as its status reports it."""
    kueue, volcano = sim.schedulers.get("kueue"), sim.schedulers.get("volcano")
    if kueue is not None and sim.objects.installed(KUEUE, "ClusterQueue"):
        _kueue_cluster_queues(sim, kueue)
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


def _kueue_cluster_queues(sim, kueue) -> None:
    pending: dict[str, int] = defaultdict(int)
    for lq in sim.objects.list(KUEUE, "LocalQueue"):
        queue_id = f"lq/{lq['metadata']['namespace']}/{lq['metadata']['name']}"
        pending[(lq.get("spec") or {}).get("clusterQueue", "")] += len(sim._pending.get(queue_id) or ())
    for cq in sim.objects.list(KUEUE, "ClusterQueue"):
        name = cq["metadata"]["name"]
        usage = cluster_queue_usage(cq.get("spec") or {}, kueue.usage.get(name) or {})
        admitted = len(kueue.admitted.get(name) or ())
        wanted = {"flavorsReservation": usage, "flavorsUsage": usage, "reservingWorkloads": admitted,
                  "admittedWorkloads": admitted, "pendingWorkloads": pending[name]}
        status = cq.get("status") or {}
        if any(status.get(key) != value for key, value in wanted.items()):
            sim.objects.patch_status(KUEUE, "ClusterQueue", None, name, wanted)


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
