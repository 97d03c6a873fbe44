"""Why a job waits, and the stretches of its wait by reason (JobWait rows), written with the status sync's changes.

A waiting job's reason is read from the scheduler's own words, the same markers `selectors.why_waiting` explains:
Kueue's topology-aware scheduling names the topology that has no room (pkg/scheduler/flavorassigner, v0.19.2),
Volcano's gang plugin says "tasks in gang unschedulable" once a job is past enqueue (pkg/scheduler/plugins/gang,
v1.15.1), and Kueue's waitForPodsReady evicts a job whose pods did not all start in time after admission
(v0.19.2). All mean placement, not quota, unless the scheduler says a worker's ResourceClaim is not created yet:
the team's ResourceQuota refused it (`claims.CLAIM_NOT_CREATED_MARKER`), which is quota. A job the portal holds for
its team's budget says "budget".
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q

from backends.observe import PODS_READY_TIMEOUT_MARKER

from .choices import JobState, WaitReason
from .claims import CLAIM_NOT_CREATED_MARKER
from .models import Job, JobWait

WAITING = {JobState.PENDING, JobState.QUEUED}
PLACEMENT_MARKERS = ('topology "', "tasks in gang unschedulable", PODS_READY_TIMEOUT_MARKER)


def wait_reason(state: str, message: str) -> str | None:
    """The reason a job in `state` with the scheduler's `message` waits; None when it does not wait."""
    if state not in WAITING:
        return None
    text = message or ""
    if "budget" in text.lower():
        return WaitReason.BUDGET
    if CLAIM_NOT_CREATED_MARKER in text:  # the team's ResourceQuota refused a worker's device claim
        return WaitReason.QUOTA
    if any(marker in text for marker in PLACEMENT_MARKERS):
        return WaitReason.PLACEMENT
    return WaitReason.QUOTA


def wait_changes(changed: list[tuple[Job, dict]], now: datetime) -> tuple[list[int], list[JobWait]]:
    """For jobs about to take `changes` (not applied yet): the jobs whose open wait ends now, and the waits that
    begin now (a job whose reason changes does both)."""
    ending, starting = [], []
    for job, changes in changed:
        if "state" not in changes and "state_message" not in changes:
            continue
        before = wait_reason(job.state, job.state_message)
        after = wait_reason(changes.get("state", job.state), changes.get("state_message", job.state_message))
        if before == after:
            continue
        if before is not None:
            ending.append(job.pk)
        if after is not None:
            starting.append(JobWait(job_id=job.pk, reason=after, started_at=now))
    return ending, starting


def wait_changes_write(changed: list[tuple[Job, dict]], now: datetime) -> None:
    """Two statements at most, inside the caller's transaction: close the ended waits, open the new ones."""
    ending, starting = wait_changes(changed, now)
    if ending:
        JobWait.objects.filter(Q(job_id__in=ending), ended_at__isnull=True).update(ended_at=now)
    if starting:
        JobWait.objects.bulk_create(starting)
