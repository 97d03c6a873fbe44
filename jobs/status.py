"""Pure mapping from what the cluster says about a job's objects to the portal's job state.

Each function takes the plain dicts read from the API server (the job object and, where the scheduler keeps
its own record, the Kueue Workload or Volcano PodGroup) and returns an `Observed` state with the time it
started and a short reason. No database, no clock.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from .choices import JobState


@dataclass(frozen=True)
class Observed:
    state: str
    message: str = ""
    admitted: bool = False
    started_at: str | None = None
    finished_at: str | None = None
    admitted_at: str | None = None  # by the cluster's clock, where it says (see `admission_time`)
    placement: dict = field(default_factory=dict)  # where the scheduler put it (see `kueue_placement`)


def _condition(obj: dict | None, kind: str) -> dict:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return {}


def _true(obj: dict | None, kind: str) -> bool:
    return _condition(obj, kind).get("status") == "True"


# Evictions that stop a running workload and queue it again: preemption, and its nodes gone with no replacement
# (kueue v0.19.2 apis/kueue/v1beta2/workload_types.go WorkloadEvictedByPreemption, WorkloadEvictedDueToNodeFailures).
EVICTED_REASONS = ("Preempted", "NodeFailures")
NOT_GPU = {"cpu", "memory", "ephemeral-storage", "pods"}


def kueue_placement(workload: dict | None) -> dict:
    """The flavors a Kueue workload was admitted to and, with Topology-Aware Scheduling, the domains its pods are
    in (status.admission.podSetAssignments[].topologyAssignment: levels, slices of values per level)."""
    assignments = (((workload or {}).get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    flavors = sorted({f for a in assignments for r, f in (a.get("flavors") or {}).items() if r not in NOT_GPU})
    domains = []
    for assignment in assignments:
        topology = assignment.get("topologyAssignment") or {}
        for piece in topology.get("slices") or []:
            values = [v.get("universal") or ",".join((v.get("individual") or {}).get("roots") or [])
                      for v in piece.get("valuesPerLevel") or []]
            domain = dict(zip(topology.get("levels") or [], values, strict=False))
            if domain not in domains:
                domains.append(domain)
    return {key: value for key, value in (("flavors", flavors), ("domains", domains)) if value}


def kueue_batch_job(job: dict, workload: dict | None) -> Observed:
    """batch/v1 Job admitted by Kueue: the Workload says queued/admitted/preempted; the Job says the rest."""
    status = job.get("status") or {}
    complete, failed = _condition(job, "Complete"), _condition(job, "Failed")
    if complete.get("status") == "True":
        return Observed(JobState.SUCCEEDED, admitted=True, started_at=status.get("startTime"),
                        finished_at=status.get("completionTime") or complete.get("lastTransitionTime"))
    if failed.get("status") == "True":
        message = f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": ")
        return Observed(JobState.FAILED, message, admitted=True, started_at=status.get("startTime"),
                        finished_at=failed.get("lastTransitionTime"))
    evicted = _condition(workload, "Evicted")
    if evicted.get("status") == "True" and evicted.get("reason") in EVICTED_REASONS:
        return Observed(JobState.PREEMPTED, evicted.get("message", ""))
    if job.get("spec", {}).get("suspend"):
        waiting = _condition(workload, "QuotaReserved")
        return Observed(JobState.QUEUED, waiting.get("message", "") if waiting.get("status") == "False" else "")
    # `ready` counts pods that run; `active` also counts pods still starting. Clusters too old to report
    # `ready` only say `active`.
    if (status.get("ready") or 0) > 0 or ((status.get("active") or 0) > 0 and "ready" not in status):
        return Observed(JobState.RUNNING, admitted=True, started_at=status.get("startTime"))
    if _true(workload, "Admitted") or status.get("startTime"):
        return Observed(JobState.ADMITTED, admitted=True, started_at=status.get("startTime"))
    return Observed(JobState.QUEUED)


VOLCANO_PHASES = {
    "Pending": JobState.QUEUED,
    "Inqueue": JobState.ADMITTED,
    "Running": JobState.RUNNING,
    "Restarting": JobState.RUNNING,
    "Completing": JobState.RUNNING,
    "Completed": JobState.SUCCEEDED,
    "Failed": JobState.FAILED,
    "Aborted": JobState.FAILED,
    "Aborting": JobState.FAILED,
    "Terminated": JobState.FAILED,
    "Terminating": JobState.FAILED,
}


def volcano_job(job: dict, podgroup: dict | None, refusal: str = "") -> Observed:
    """`refusal`: the message of the latest Unschedulable Event on the PodGroup, Volcano's only word on why its
    enqueue action keeps a PodGroup Pending. An Inqueue PodGroup whose gang cannot be placed is still waiting,
    with the gang plugin's NotEnoughResources condition. The scheduler replaces a condition by its type and never
    removes one (v1.15.1 framework/session.go UpdatePodGroupCondition), so once the gang is placed its old
    Unschedulable stays, still True, beside a newer Scheduled: that one is no longer the news."""
    phase_info = (job.get("status") or {}).get("state") or {}
    phase = phase_info.get("phase", "Pending")
    state = VOLCANO_PHASES.get(phase, JobState.QUEUED)
    message = phase_info.get("message", "")
    pg_phase = ((podgroup or {}).get("status") or {}).get("phase")
    unschedulable, scheduled = _condition(podgroup, "Unschedulable"), _condition(podgroup, "Scheduled")
    waiting = unschedulable.get("status") == "True" and not (
        scheduled.get("status") == "True"
        and (scheduled.get("lastTransitionTime") or "") >= (unschedulable.get("lastTransitionTime") or ""))
    if state == JobState.QUEUED and pg_phase == "Inqueue" and not waiting:
        state = JobState.ADMITTED
    if state == JobState.QUEUED:
        message = (unschedulable.get("message") if waiting else "") or (
            refusal if pg_phase in (None, "Pending") else "") or message
    if phase == "Aborted" and "preempt" in (phase_info.get("reason", "") + message).lower():
        state = JobState.PREEMPTED
    if phase == "Pending" and phase_info.get("reason") == "PodEvicted":
        # Evicted by the scheduler's preempt or reclaim action: the job waits to be scheduled again.
        return Observed(JobState.PREEMPTED, phase_info.get("message", ""))
    transition = phase_info.get("lastTransitionTime")
    return Observed(
        state,
        message,
        admitted=state not in (JobState.QUEUED,),
        started_at=transition if state == JobState.RUNNING else None,
        finished_at=transition if state in (JobState.SUCCEEDED, JobState.FAILED) else None,
    )


def ray_job(job: dict, workload: dict | None = None) -> Observed:
    status = job.get("status") or {}
    deployment = status.get("jobDeploymentStatus", "")
    job_status = status.get("jobStatus", "")
    message = status.get("message", "")
    if deployment == "Complete" or job_status in ("SUCCEEDED", "STOPPED", "FAILED"):
        if job_status == "SUCCEEDED":
            return Observed(JobState.SUCCEEDED, admitted=True, started_at=status.get("startTime"),
                            finished_at=status.get("endTime"))
        return Observed(JobState.FAILED, status.get("reason", "") or message, admitted=True,
                        started_at=status.get("startTime"), finished_at=status.get("endTime"))
    if deployment in ("Failed", "ValidationFailed"):
        return Observed(JobState.FAILED, f"{status.get('reason', deployment)}: {message}".strip(": "),
                        admitted=True, finished_at=status.get("endTime"))
    evicted = _condition(workload, "Evicted")
    if evicted.get("status") == "True" and evicted.get("reason") in EVICTED_REASONS:
        return Observed(JobState.PREEMPTED, evicted.get("message", ""))
    if deployment == "Suspended" and status.get("reason") == "Preempted":
        return Observed(JobState.PREEMPTED, message)
    if deployment in ("", "Suspended", "Suspending", "Waiting") or job.get("spec", {}).get("suspend"):
        waiting = _condition(workload, "QuotaReserved")
        return Observed(JobState.QUEUED, waiting.get("message", "") if waiting.get("status") == "False" else "")
    if deployment == "Running" and job_status == "RUNNING":
        return Observed(JobState.RUNNING, admitted=True, started_at=status.get("startTime"))
    return Observed(JobState.ADMITTED, message, admitted=True, started_at=status.get("startTime"))


def admission_time(job: dict, workload: dict | None, podgroup: dict | None) -> str | None:
    """When the scheduler admitted the job, by the cluster's own clock: Kueue's Workload `Admitted` (else
    `QuotaReserved`) condition; Volcano's PodGroup `Scheduled` condition (set when the gang is let in), else the
    vcjob's move to `Inqueue`. None when the cluster does not say."""
    for kind in ("Admitted", "QuotaReserved"):
        condition = _condition(workload, kind)
        if condition.get("status") == "True" and condition.get("lastTransitionTime"):
            return condition["lastTransitionTime"]
    scheduled = _condition(podgroup, "Scheduled")
    if scheduled.get("lastTransitionTime"):
        return scheduled["lastTransitionTime"]
    state = (job.get("status") or {}).get("state") or {}
    if state.get("phase") == "Inqueue":
        return state.get("lastTransitionTime")
    return None


@dataclass(frozen=True)
class JobPods:
    started: str | None = None  # when its first pod started running
    nodes: frozenset[str] = frozenset()  # the nodes its pods were bound to


def pods_by_job(pods, job_label: str) -> dict[str, JobPods]:
    """Per job id (the pods' `job_label`), when its first pod started and the nodes its pods are bound to."""
    starts: dict[str, list[str]] = defaultdict(list)
    nodes: dict[str, set[str]] = defaultdict(set)
    for pod in pods:
        job_id = (pod["metadata"].get("labels") or {}).get(job_label)
        if not job_id:
            continue
        when, node = pod_start_time(pod), (pod.get("spec") or {}).get("nodeName")
        starts[job_id] += [when] if when else []
        nodes[job_id] |= {node} if node else set()
    return {job_id: JobPods(min(starts[job_id], default=None), frozenset(nodes[job_id])) for job_id in nodes}


def pod_start_time(pod: dict) -> str | None:
    """When a pod's containers started running: the earliest container `startedAt` (running or since
    terminated), else the time it became Ready. None for a pod that has not run."""
    status = pod.get("status") or {}
    times = []
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        started = (state.get("running") or state.get("terminated") or {}).get("startedAt")
        if started:
            times.append(started)
    if times:
        return min(times)
    ready = _condition(pod, "Ready")
    return ready.get("lastTransitionTime") if ready.get("status") == "True" else None
