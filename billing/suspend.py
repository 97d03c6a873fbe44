"""Running jobs and a budget hold, where platform admins allow it per priority tier
(`PriorityTier.budget_hold_action`): new work is always held; running batch jobs of a "suspend" tier are suspended.

When the hold starts, the submitter of each such running job is told (e-mail and the team's webhook,
`job.suspend_notice`) that it will be suspended BUDGET_HOLD_SUSPEND_MINUTES later unless the hold lifts, so work can
be checkpointed. Then each still running is stopped (objects deleted, quota freed, its final message saying why) and
submitted again at once (`jobs.services.job_suspend`): the copy waits behind the hold like any new job (Kueue: the
budget admission check; Volcano: kept in the portal) and starts when the hold lifts. Each step is an audit event.
Workspaces follow their own stages. The pass is idempotent: a job already stopped is not stopped twice, and a hold
that lifted in the meantime suspends nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from jobs import services as job_services
from jobs.choices import JobKind, JobState
from jobs.models import Job
from tenants import webhooks
from tenants.audit import audit_record
from tenants.choices import BudgetHoldAction
from tenants.mail import notify_users

from .models import BudgetHold

RUNNING = (JobState.ADMITTED, JobState.RUNNING)


def suspendable(team_ids) -> list[Job]:
    return list(Job.objects.filter(team_id__in=team_ids, state__in=RUNNING, cancel_requested_at__isnull=True,
                                   priority_tier__budget_hold_action=BudgetHoldAction.SUSPEND)
                .exclude(kind=JobKind.WORKSPACE)
                .select_related("team", "cluster", "priority_tier", "submitted_by").order_by("pk"))


def _tell(job: Job, event: str, subject: str, reason: str, next_step: str) -> None:
    notify_users(users=[job.submitted_by], subject=subject,
                 body=f"{job.team.slug}/{job.object_name}: {reason}\n\n{next_step}")
    webhooks.notice(team=job.team, event=event, subject=subject, reason=reason, next_step=next_step,
                    data={"job": {"id": job.pk, "name": job.name, "object": job.object_name,
                                  "cluster": job.cluster.name, "tier": job.priority_tier.name}})


def suspend_at(hold: BudgetHold) -> datetime:
    return hold.started_at + timedelta(minutes=settings.BUDGET_HOLD_SUSPEND_MINUTES)


def hold_notice(*, hold: BudgetHold) -> int:
    """When a hold starts: tell the submitter of each running job it will suspend. Returns how many were told."""
    jobs = suspendable([hold.team_id])
    when = suspend_at(hold)
    for job in jobs:
        reason = hold.message
        next_step = (f"It will be suspended at {when:%H:%M} UTC unless the hold lifts first (its tier, "
                     f"{job.priority_tier.name}, is suspended by budget holds): checkpoint its work. It is "
                     "resubmitted at once and starts again when the hold lifts.")
        audit_record(actor=None, action="job.suspend_notice", obj=job, team=job.team,
                     after={"suspend_at": when.isoformat(timespec="seconds"), "reason": reason})
        _tell(job, "job.suspend_notice", f"Job {job.name} will be suspended by the budget", reason, next_step)
    return len(jobs)


def suspend_due(*, now: datetime) -> int:
    """Suspend the running jobs of every hold open for BUDGET_HOLD_SUSPEND_MINUTES. Returns how many."""
    holds = {h.team_id: h for h in BudgetHold.objects.filter(
        ended_at__isnull=True, started_at__lte=now - timedelta(minutes=settings.BUDGET_HOLD_SUSPEND_MINUTES))}
    done = 0
    for job in suspendable(list(holds)):
        hold = holds[job.team_id]
        again = job_services.job_suspend(job=job, cause="the team's budget hold", reason=hold.message)
        audit_record(actor=None, action="job.budget_suspend", obj=job, team=job.team,
                     after={"reason": hold.message, "resubmitted_as": again.pk if again else None})
        next_step = (f"It was resubmitted as job {again.pk} ({again.name}), which starts when the hold lifts."
                     if again else "It could not be resubmitted: resubmit it when the hold lifts.")
        _tell(job, "job.suspended", f"Job {job.name} suspended by the budget", hold.message, next_step)
        done += 1
    return done
