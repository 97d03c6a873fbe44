"""The Workload status the sandbox's Kueue writes when it admits or evicts a workload (kubernetes-sigs/kueue
pkg/workload/admission.go and conditions: QuotaReserved, Admitted, Evicted, Preempted, Requeued; the admission's
podSetAssignments with flavors, resource usage and, with Topology-Aware Scheduling, the topology assignment)."""

from __future__ import annotations

from . import kueue_tas
from .model import Tracked, condition, fmt, iso, set_conditions


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


PODS_READY_TIMEOUT = "PodsReadyTimeout"
BACKOFF_BASE_SECONDS, BACKOFF_MAX_SECONDS = 60, 3600  # waitForPodsReady.requeuingStrategy's defaults


def requeue_backoff(count: int) -> float:
    """Seconds until a workload evicted for the `count`th time by the PodsReady timeout may be admitted again."""
    return float(min(BACKOFF_BASE_SECONDS * 2 ** (count - 1), BACKOFF_MAX_SECONDS))


def evict_not_ready(sim, admitted: dict, now: float) -> None:
    """waitForPodsReady: a workload admitted longer than the timeout ago whose pods are not all ready is evicted
    and requeued after a backoff of 60 s doubling per eviction up to an hour (pkg/controller/core
    workload_controller.go reconcileNotReadyTimeout; pkg/workload/workload.go UpdateRequeueState)."""
    for jobs in list(admitted.values()):
        for job in list(jobs.values()):
            if job.state == "starting" and now - job.admitted_at >= sim.pods_ready_timeout:
                job.requeues += 1
                job.requeue_at = now + requeue_backoff(job.requeues)
                sim.evict(job, now, f"Exceeded the PodsReady timeout {job.namespace}/{job.scheduler_object}",
                          reason=PODS_READY_TIMEOUT)


def pods_not_ready(now: float) -> dict:
    return condition("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded", now)


def pods_ready(now: float) -> dict:
    return condition("PodsReady", True, "Started", "All pods reached readiness and the workload is running", now)


def evicted(conditions: list[dict], message: str, reason: str, now: float, job: Tracked) -> dict:
    """Evicted/Preempted/Requeued as workload.SetEvictedCondition and SetPreemptedCondition write them; a workload
    whose nodes are gone (NodeFailures) is evicted, not preempted, and one whose pods were not ready in time
    (PodsReadyTimeout) waits out its backoff before it is requeued (status.requeueState)."""
    if reason in (kueue_tas.NODE_FAILURES, PODS_READY_TIMEOUT):
        evicted_reason, preempted = reason, []
    else:
        evicted_reason, preempted = "Preempted", [condition("Preempted", True, reason, message, now)]
    backoff = reason == PODS_READY_TIMEOUT
    updates = [condition("Evicted", True, evicted_reason, message, now), *preempted,
               # The job reconciler releases the reservation as pending again, with the eviction's words
               # (pkg/controller/jobframework/reconciler.go; "Pending" while UnadmittedWorkloadsObservability is off).
               condition("QuotaReserved", False, "Pending", message, now),
               condition("Admitted", False, "NoReservation", "The workload has no reservation", now),
               condition("Requeued", not backoff, evicted_reason, message, now), pods_not_ready(now)]
    status = {"conditions": set_conditions(conditions, *updates), "admission": None}
    if backoff:
        status["requeueState"] = {"count": job.requeues, "requeueAt": iso(job.requeue_at)}
    return status
