"""The idle rule: what a running workspace's GPUs do now (`billing.live_activity`), judged by
`billing.activity.judge_idle` against the platform's threshold, moves it through its stages: idle for
WORKSPACE_WARN_MINUTES → warned (e-mail, banner, "keep it running"); still idle WORKSPACE_SUSPEND_MINUTES later →
suspended (run ended, quota back, volume kept); suspended WORKSPACE_VOLUME_DAYS → its volume deleted (policy
"delete") or kept ("keep"). Busy again clears the idle clock and a warning. Each stage is an audit event carrying
the reading that triggered it."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from billing.activity import judge_idle
from billing.live_activity import PodReading, job_reading, with_readings

from . import selectors, services
from .choices import Stage
from .models import Workspace


def _reading_for(workspace: Workspace, readings: list[PodReading]) -> PodReading | None:
    run = workspace.run
    return job_reading(readings, namespace=workspace.team.namespace, job_id=run.pk, object_name=run.object_name)


def _minutes(delta: timedelta) -> float:
    return delta.total_seconds() / 60


def workspace_judge(workspace: Workspace, reading: PodReading, now: datetime) -> str:
    """Take one reading of a running workspace; the stage it moved to, or ''."""
    verdict = judge_idle(signal=reading.signal, utilisation=reading.utilisation,
                         threshold=settings.WORKSPACE_IDLE_THRESHOLD, memory_gib=reading.memory_gib)
    seen = {"signal": reading.signal, "utilisation": round(reading.utilisation, 4), "idle": verdict.idle,
            "verdict": verdict.reason, "threshold": settings.WORKSPACE_IDLE_THRESHOLD,
            "at": now.isoformat(timespec="seconds")}
    if not verdict.idle:
        services.workspace_seen(workspace=workspace, activity=seen, idle_since=None)
        return ""
    idle_since = workspace.idle_since or now
    idle = _minutes(now - idle_since)
    seen["idle_minutes"] = round(idle, 1)
    kept = workspace.keep_until is not None and now < workspace.keep_until
    if workspace.stage == Stage.ACTIVE and not kept and idle >= settings.WORKSPACE_WARN_MINUTES:
        services.workspace_warn(workspace=workspace, activity=seen, idle_since=idle_since, now=now,
                                reason=f"Its GPUs have been idle for {idle:.0f} min: {verdict.reason}.")
        return Stage.WARNED
    if workspace.stage == Stage.WARNED and _minutes(now - workspace.warned_at) >= settings.WORKSPACE_SUSPEND_MINUTES:
        services.workspace_suspend(workspace=workspace, activity=seen,
                                   reason=f"Its GPUs stayed idle for {idle:.0f} min after the warning: "
                                          f"{verdict.reason}.")
        return Stage.SUSPENDED
    services.workspace_seen(workspace=workspace, activity=seen, idle_since=idle_since)
    return ""


def workspace_volumes_expire(now: datetime) -> int:
    """Volumes of workspaces suspended longer than the platform keeps them, under the "delete" policy."""
    if settings.WORKSPACE_VOLUME_POLICY != "delete":
        return 0
    cutoff = now - timedelta(days=settings.WORKSPACE_VOLUME_DAYS)
    done = 0
    for workspace in selectors.volumes_to_expire(before=cutoff):
        services.workspace_volume_delete(
            workspace=workspace, reason=f"It was suspended on {workspace.suspended_at:%Y-%m-%d %H:%M} UTC and the "
                                        f"platform keeps the volumes of suspended workspaces "
                                        f"{settings.WORKSPACE_VOLUME_DAYS:g} days.")
        done += 1
    return done


def workspace_cull_all(now: datetime | None = None) -> dict:
    """One pass over every running workspace, one activity read per cluster; a cluster whose activity cannot be
    read is reported and its workspaces are left as they are (never suspended on no evidence)."""
    now = now or timezone.now()
    report: dict = {"read": 0, "moved": {}, "failed": {}, "volumes": 0}
    for workspace, readings in with_readings(selectors.cullable(), report=report, now=now):
        reading = _reading_for(workspace, readings)
        if reading is None:
            continue
        report["read"] += 1
        moved = workspace_judge(workspace, reading, now)
        if moved:
            report["moved"][workspace.pk] = moved
    report["volumes"] = workspace_volumes_expire(now)
    return report
