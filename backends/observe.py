"""Reading a job's state from what the cluster says of it, the part every backend shares: the `Observed` state,
conditions, a KubeRay RayJob (the same on every scheduler, with Kueue's Workload beside it when there is one) and
the admission time. Each backend maps its own job objects and records (`Backend.observe`). No database, no clock.
"""

from dataclasses import dataclass, field

from .choices import JobState

# A preempted job is not over: Kueue requeues its evicted Workload and Volcano restarts its vcjob, so its page offers
# Cancel, not Resubmit, and its sentence says so.
REQUEUED = "It queues again by itself and restarts when the GPUs are free; cancel it if it is no longer needed."


@dataclass(frozen=True)
class Observed:
    state: str
    message: str = ""
    admitted: bool = False
    started_at: str | None = None
    finished_at: str | None = None
    admitted_at: str | None = None  # by the cluster's clock, where it says (see `admission_time`)
    placement: dict = field(default_factory=dict)  # where the scheduler put it (each backend says how)


def condition(obj: dict | None, kind: str) -> dict:
    for found in ((obj or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return found
    return {}


def true(obj: dict | None, kind: str) -> bool:
    return condition(obj, kind).get("status") == "True"


# Evictions that stop a running workload and queue it again: preemption, and its nodes gone with no replacement
# (kueue apis/kueue/v1beta2/workload_types.go WorkloadEvictedByPreemption, WorkloadEvictedDueToNodeFailures).
EVICTED_REASONS = ("Preempted", "NodeFailures")
# Kueue evicts an admitted workload whose pods are not all ready within waitForPodsReady's timeout (on by default
# since v0.19, 30 minutes: apis/config/v1beta2/defaults.go) and queues it again after a backoff
# (pkg/controller/core/workload_controller.go reconcileNotReadyTimeout): waiting again, not preempted.
PODS_READY_TIMEOUT = "PodsReadyTimeout"
PODS_READY_TIMEOUT_MARKER = "Exceeded the PodsReady timeout"


def timed_out(workload: dict | None) -> str:
    """Kueue's eviction message while the workload waits again after the PodsReady timeout; '' otherwise."""
    evicted = condition(workload, "Evicted")
    if evicted.get("status") == "True" and evicted.get("reason") == PODS_READY_TIMEOUT:
        return evicted.get("message") or PODS_READY_TIMEOUT_MARKER
    return ""


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
    evicted = condition(workload, "Evicted")
    if evicted.get("status") == "True" and evicted.get("reason") in EVICTED_REASONS:
        return Observed(JobState.PREEMPTED, evicted.get("message", ""))
    if message_timed_out := timed_out(workload):
        return Observed(JobState.QUEUED, message_timed_out)
    if deployment == "Suspended" and status.get("reason") == "Preempted":
        return Observed(JobState.PREEMPTED, message)
    if deployment in ("", "Suspended", "Suspending", "Waiting") or job.get("spec", {}).get("suspend"):
        waiting = condition(workload, "QuotaReserved")
        return Observed(JobState.QUEUED, waiting.get("message", "") if waiting.get("status") == "False" else "")
    if deployment == "Running" and job_status == "RUNNING":
        return Observed(JobState.RUNNING, admitted=True, started_at=status.get("startTime"))
    return Observed(JobState.ADMITTED, message, admitted=True, started_at=status.get("startTime"))


def admission_time(job: dict, workload: dict | None, podgroup: dict | None) -> str | None:
    """When the scheduler admitted the job, by the cluster's own clock: Kueue's Workload `Admitted` (else
    `QuotaReserved`) condition; Volcano's PodGroup `Scheduled` condition (set when the gang is let in), else the
    vcjob's move to `Inqueue`. None when the cluster does not say."""
    for kind in ("Admitted", "QuotaReserved"):
        found = condition(workload, kind)
        if found.get("status") == "True" and found.get("lastTransitionTime"):
            return found["lastTransitionTime"]
    scheduled = condition(podgroup, "Scheduled")
    if scheduled.get("lastTransitionTime"):
        return scheduled["lastTransitionTime"]
    state = (job.get("status") or {}).get("state") or {}
    if state.get("phase") == "Inqueue":
        return state.get("lastTransitionTime")
    return None
