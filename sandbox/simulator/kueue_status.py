"""The Workload status the sandbox's Kueue writes when it admits or evicts a workload (kueue v0.19.2
pkg/workload/admission.go and conditions: QuotaReserved, Admitted, Evicted, Preempted, Requeued; the admission's
podSetAssignments with flavors, resource usage and, with Topology-Aware Scheduling, the topology assignment)."""

from __future__ import annotations

from . import kueue_tas
from .model import Tracked, condition, fmt, set_conditions


def admitted(job: Tracked, conditions: list[dict], now: float) -> dict:
    updates = [condition("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {job.cluster_queue}",
                         now),
               condition("Admitted", True, "Admitted", "The workload is admitted", now)]
    if any(c["type"] == "Evicted" for c in conditions):
        updates.append(condition("Evicted", False, "QuotaReserved", "Previously: evicted", now))
        updates.append(condition("Requeued", True, "QuotaReserved", "The workload was requeued", now))
    return {"conditions": set_conditions(conditions, *updates),
            "admission": {"clusterQueue": job.cluster_queue, "podSetAssignments": assignments(job)}}


def assignments(job: Tracked) -> list[dict]:
    return [{"name": p.name, "count": p.count, "flavors": dict(sorted(job.flavors.get(p.name, {}).items())),
             "resourceUsage": {r: fmt(v * p.count) for r, v in sorted(p.requests.items())},
             **({"topologyAssignment": kueue_tas.assignment_status(job.topology[p.name])}
                if job.topology.get(p.name) else {})}
            for p in job.pod_sets]


def evicted(conditions: list[dict], message: str, reason: str, now: float) -> dict:
    """Evicted/Preempted/Requeued as workload.SetEvictedCondition and SetPreemptedCondition write them; a workload
    whose nodes are gone (NodeFailures) is evicted, not preempted."""
    lost = reason == kueue_tas.NODE_FAILURES
    updates = [condition("Evicted", True, reason if lost else "Preempted", message, now),
               *([] if lost else [condition("Preempted", True, reason, message, now)]),
               condition("QuotaReserved", False, "Preempted", message, now),
               condition("Admitted", False, "NoReservation", "The workload has no reservation", now),
               condition("Requeued", True, reason if lost else "Preempted", message, now)]
    return {"conditions": set_conditions(conditions, *updates), "admission": None}
