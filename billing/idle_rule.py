"""The idle rule for batch jobs, where platform admins allow it per priority tier (`PriorityTier.idle_action`):
a running job whose GPUs do no work (`live_activity`, judged by `activity.judge_idle` against
JOB_IDLE_THRESHOLD) for JOB_IDLE_WARN_MINUTES warns its submitter (e-mail and the team's webhook); on a tier whose
action is "suspend", still idle JOB_IDLE_STOP_MINUTES later, the job is stopped (its objects deleted, its quota
freed) with the reason as its final message. Each step is an audit event with the reading that triggered it.
Workspaces follow their own stages (the workspaces app)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs import services as job_services
from jobs.choices import JobKind, JobState
from jobs.models import Job
from tenants import webhooks
from tenants.audit import audit_record
from tenants.choices import IdleAction
from tenants.mail import notify_users

from .activity import judge_idle
from .live_activity import job_reading, with_readings
from .models import JobIdleWatch

WARNED, STOPPED = "warned", "stopped"


def watched_jobs():
    return (Job.objects.filter(state=JobState.RUNNING, cancel_requested_at__isnull=True)
            .exclude(kind=JobKind.WORKSPACE).exclude(priority_tier__idle_action=IdleAction.NONE)
            .select_related("team", "cluster__usage_source", "priority_tier", "submitted_by"))


def _tell(job: Job, event: str, subject: str, reason: str, next_step: str, reading: dict) -> None:
    notify_users(users=[job.submitted_by], subject=subject,
                 body=f"{job.team.slug}/{job.object_name}: {reason}\n\n{next_step}")
    webhooks.notice(team=job.team, event=event, subject=subject, reason=reason, next_step=next_step,
                    data={"job": {"id": job.pk, "name": job.name, "object": job.object_name,
                                  "cluster": job.cluster.name, "tier": job.priority_tier.name, "activity": reading}})


@transaction.atomic
def job_idle_warn(*, job: Job, watch: JobIdleWatch, reading: dict, minutes: float, now: datetime) -> None:
    watch.warned_at, watch.activity = now, reading
    watch.save(update_fields=["warned_at", "activity"])
    stops = job.priority_tier.idle_action == IdleAction.SUSPEND
    reason = f"Its GPUs have done no work for {minutes:.0f} min: {reading['verdict']}."
    next_step = (f"It will be stopped in {settings.JOB_IDLE_STOP_MINUTES:g} min unless its GPUs get busy "
                 f"(its tier, {job.priority_tier.name}, allows it); cancel it if it is no longer needed."
                 if stops else "Cancel it if it is no longer needed: the GPUs would serve another job.")
    audit_record(actor=None, action="job.idle_warn", obj=job, team=job.team,
                 after={"reason": reason, "activity": reading})
    _tell(job, "job.idle_warned", f"Job {job.name} is idle", reason, next_step, reading)


@transaction.atomic
def job_idle_stop(*, job: Job, watch: JobIdleWatch, reading: dict, minutes: float) -> None:
    reason = (f"Stopped by the idle rule: its GPUs did no work for {minutes:.0f} min ({reading['verdict']}), and "
              f"its tier, {job.priority_tier.name}, lets the platform stop idle jobs.")
    job_services.job_stop(job=job, reason=reason)
    watch.delete()
    audit_record(actor=None, action="job.idle_stop", obj=job, team=job.team,
                 after={"reason": reason, "activity": reading})
    _tell(job, "job.idle_stopped", f"Job {job.name} stopped: idle", reason,
          "Its GPUs went back to the team's quota; resubmit it when it has work to do.", reading)


def job_idle_judge(job: Job, watch: JobIdleWatch | None, reading, now: datetime) -> str:
    verdict = judge_idle(signal=reading.signal, utilisation=reading.utilisation,
                         threshold=settings.JOB_IDLE_THRESHOLD, memory_gib=reading.memory_gib)
    seen = {"signal": reading.signal, "utilisation": round(reading.utilisation, 4), "idle": verdict.idle,
            "verdict": verdict.reason, "at": now.isoformat(timespec="seconds")}
    if not verdict.idle:
        if watch is not None:
            watch.delete()
        return ""
    if watch is None:
        watch = JobIdleWatch.objects.create(job=job, idle_since=now, activity=seen)
    minutes = (now - watch.idle_since).total_seconds() / 60
    if watch.warned_at is None and minutes >= settings.JOB_IDLE_WARN_MINUTES:
        job_idle_warn(job=job, watch=watch, reading=seen, minutes=minutes, now=now)
        return WARNED
    if (watch.warned_at is not None and job.priority_tier.idle_action == IdleAction.SUSPEND
            and (now - watch.warned_at).total_seconds() / 60 >= settings.JOB_IDLE_STOP_MINUTES):
        job_idle_stop(job=job, watch=watch, reading=seen, minutes=minutes)
        return STOPPED
    return ""


def job_idle_rule_all(now: datetime | None = None) -> dict:
    """One pass over the running batch jobs of tiers that allow it; one activity read per cluster. A cluster whose
    activity cannot be read is reported and its jobs left alone."""
    now = now or timezone.now()
    report: dict = {"read": 0, "moved": {}, "failed": {}}
    jobs = list(watched_jobs())
    watches = {w.job_id: w for w in JobIdleWatch.objects.filter(job__in=[j.pk for j in jobs])}
    for job, readings in with_readings(jobs, report=report, now=now):
        reading = job_reading(readings, namespace=job.team.namespace, job_id=job.pk, object_name=job.object_name)
        if reading is None:
            continue
        report["read"] += 1
        moved = job_idle_judge(job, watches.get(job.pk), reading, now)
        if moved:
            report["moved"][job.pk] = moved
    return report
