"""Reads for the usage explorer: a team's GPU-hours over any range of days, drilled down from the team to one
flavor, to one job, to the job's hours. Each level is one aggregate query whatever the size of the range. The last
level, the job's GPUs one by one, is read live from the cluster's usage source (the portal stores no device)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Avg, Sum
from django.db.models.functions import TruncDate
from django.http import Http404

from jobs.models import Job
from tenants.models import GpuFlavor, Team

from .gpus import JobGpus
from .models import JobUsageHour, UsageHour
from .pricing import ZERO
from .sources import source_for


@dataclass(frozen=True)
class Row:
    key: str  # the flavor's name or the job's id: what the row drills into
    label: str
    allocated: Decimal
    used: Decimal

    @property
    def utilisation(self) -> float | None:
        return float(self.used / self.allocated) if self.allocated else None


def _rows(pairs) -> list[Row]:
    return sorted(pairs, key=lambda r: (-r.allocated, r.label))


def by_flavor(*, team: Team, start: datetime, end: datetime) -> list[Row]:
    sums = (UsageHour.objects.filter(team=team, hour__gte=start, hour__lt=end).values("flavor__name")
            .annotate(allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours")))
    return _rows(Row(s["flavor__name"], s["flavor__name"], s["allocated"], s["used"]) for s in sums)


def by_job(*, team: Team, flavor: GpuFlavor, start: datetime, end: datetime) -> tuple[list[Row], Row | None]:
    """The flavor's GPU-hours per job, and what no portal job accounts for (pods sent with kubectl, say)."""
    sums = (JobUsageHour.objects.filter(job__team=team, flavor=flavor, hour__gte=start, hour__lt=end)
            .values("job_id", "job__name")
            .annotate(allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours")))
    rows = _rows(Row(str(s["job_id"]), s["job__name"], s["allocated"], s["used"]) for s in sums)
    whole = UsageHour.objects.filter(team=team, flavor=flavor, hour__gte=start, hour__lt=end).aggregate(
        allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours"))
    rest_allocated = (whole["allocated"] or ZERO) - sum((r.allocated for r in rows), ZERO)
    rest_used = (whole["used"] or ZERO) - sum((r.used for r in rows), ZERO)
    rest = Row("", "outside portal jobs", rest_allocated, max(ZERO, rest_used)) if rest_allocated > 0 else None
    return rows, rest


def daily(*, team: Team, start: datetime, end: datetime, flavor: GpuFlavor | None = None) -> list[dict]:
    """GPU-hours per day and flavor ([{day, flavor, allocated, used}]), of one flavor when given."""
    rows = UsageHour.objects.filter(team=team, hour__gte=start, hour__lt=end)
    if flavor is not None:
        rows = rows.filter(flavor=flavor)
    rows = (rows.annotate(day=TruncDate("hour")).values("day", "flavor__name")
            .annotate(allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours")).order_by("day", "flavor__name"))
    return [{"day": r["day"], "flavor": r["flavor__name"], "allocated": r["allocated"], "used": r["used"]}
            for r in rows]


def team_flavor(*, team: Team, name: str) -> GpuFlavor:
    """A flavor the team has used or may use, by name; another team's or an unknown one is a 404."""
    flavor = (GpuFlavor.objects.filter(name=name, cluster__team_namespaces__team=team).select_related("cluster")
              .order_by("pk").first())
    if flavor is None:
        raise Http404("No such flavor for this team")
    return flavor


def team_job(*, team: Team, pk: str) -> Job:
    job = (Job.objects.filter(team=team, pk=int(pk)).select_related("flavor", "team", "cluster__usage_source").first()
           if pk.isdigit() else None)
    if job is None:
        raise Http404("No such job in this team")
    return job


def job_hours(*, job: Job, start: datetime, end: datetime) -> list[dict]:
    """The job's collected hours in the range, as the job page's activity chart takes them."""
    rows = (JobUsageHour.objects.filter(job=job, hour__gte=start, hour__lt=end).values("hour")
            .annotate(allocated=Sum("allocated_gpu_hours"), utilisation=Avg("utilisation_avg"),
                      sm_active=Avg("sm_active_avg"), tensor_active=Avg("tensor_active_avg"),
                      memory=Sum("gpu_memory_used_gib_avg")).order_by("hour"))
    return [{"hour": r["hour"], "utilisation": r["utilisation"], "sm_active": r["sm_active"],
             "tensor_active": r["tensor_active"], "memory_gib": r["memory"] / (float(r["allocated"]) or 1e-9)}
            for r in rows]


def job_window(*, job: Job, start: datetime, end: datetime, now: datetime) -> tuple[datetime, datetime] | None:
    """The part of [start, end) in which the job's pods could hold GPUs: from its start (its submission while the
    start is not known yet) to its end, or now; None when the range misses it."""
    first, last = max(start, job.started_at or job.submitted_at), min(end, job.finished_at or now)
    return (first, last) if first < last else None


def job_gpus(*, job: Job, start: datetime, end: datetime) -> JobGpus:
    """Each GPU the job's pods held in [start, end), from the cluster's usage source (metrics.MetricsError when it
    cannot answer: unreachable, too slow, no source)."""
    return source_for(job.cluster, timeout=settings.BILLING_PAGE_TIMEOUT).job_gpus(
        namespace=job.team.namespace, job=str(job.pk), pod_prefix=job.object_name, start=start, end=end)


def job_days(*, job: Job, today: date, max_days: int) -> tuple[date, date]:
    """The UTC days a job ran (from its submission while it has not started), at most the last `max_days` of them."""
    last = (job.finished_at.date() if job.finished_at else today)
    first = (job.started_at or job.submitted_at).date()
    return max(first, last - timedelta(days=max_days - 1)), last
