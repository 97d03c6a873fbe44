"""Every read of usage and money. Budgets, chart series and idle GPUs are here; prices and the usage aggregate
(billing/pricing.py), statements (billing/statements.py) and exports (billing/exports.py) are re-exported below, so
this module stays the one entry point for reads.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Max, Min, OuterRef, Subquery, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from jobs.choices import JobState
from jobs.models import Job
from jobs.selectors import job_list
from tenants.models import Cluster, GpuFlavor, Team
from tenants.selectors import team_list

from . import activity
from .choices import HourState
from .exports import FOCUS_COLUMNS, focus_rows, statement_json, write_focus_csv  # noqa: F401 - re-exported
from .models import Budget, BudgetAlert, CollectedHour, JobUsageHour, UsageHour
from .pricing import (  # noqa: F401 - re-exported: selectors is the entry point for reads
    CENT,
    GPU_HOURS_PLACES,
    HOUR,
    MONTH_RE,
    UNPRICED,
    ZERO,
    PricePeriod,
    current_month,
    floor_hour,
    hours_between,
    money,
    month_bounds,
    month_or_current,
    parent_flavor,
    parse_month,
    price_periods,
    rate_cards,
    rate_in_force,
    segments,
    usage_sums,
)
from .statements import (  # noqa: F401
    MissingHours,
    RollupRow,
    Statement,
    StatementLine,
    all_statements,
    first_month,
    missing_hours,
    retry_from,
    rollups,
    statement_state,
    statements_for,
    team_statement,
)

# --- budgets -------------------------------------------------------------------------------------------------


@dataclass
class BudgetStatus:
    month: date
    budget: Budget | None
    spent: Decimal
    forecast: Decimal
    alerts: list[BudgetAlert]

    @property
    def percent(self) -> Decimal | None:
        if self.budget is None:
            return None
        return (100 * self.spent / self.budget.amount).quantize(Decimal("0.1"))

    @property
    def forecast_percent(self) -> Decimal | None:
        if self.budget is None:
            return None
        return (100 * self.forecast / self.budget.amount).quantize(Decimal("0.1"))

    @property
    def level(self) -> int:
        """The highest alert threshold crossed (0 when none): drives the banner."""
        if self.budget is None:
            return 0
        return max((t for t in settings.BUDGET_ALERT_THRESHOLDS if self.spent * 100 >= self.budget.amount * t),
                   default=0)


def forecast(statement: Statement, now: datetime | None = None) -> Decimal:
    """End-of-month spend at the current burn rate: cost per collected hour so far × the hours of the month the team
    exists. Hours not collected yet are left out of the rate, so a collection gap does not make the month look cheap,
    and a team created mid-month is not diluted by the hours before it existed."""
    if statement.is_final:
        return statement.total_cost
    now = now or timezone.now()
    # A team created mid-month burns only from its first hour: its rate is over the hours it existed. A team whose
    # usage predates its row (usage collected before it was added, the demo's backfilled month) existed from then.
    created = floor_hour(statement.team.created_at)
    born = max(statement.start, min(created, statement.first_usage) if statement.first_usage else created)
    elapsed = hours_between(born, min(statement.end, floor_hour(now)))
    covered = elapsed - len({m.start + i * HOUR for m in statement.missing for i in range(m.hours)
                             if m.start + i * HOUR >= born})
    if covered <= 0:
        return statement.total_cost
    return money(statement.total_cost / Decimal(covered) * hours_between(born, statement.end))


def budget_status(*, team: Team, statement: Statement, now: datetime | None = None) -> BudgetStatus:
    budget = Budget.objects.filter(team=team, month=statement.month).first()
    alerts = list(budget.alerts.order_by("threshold")) if budget else []
    return BudgetStatus(month=statement.month, budget=budget, spent=statement.total_cost,
                        forecast=forecast(statement, now), alerts=alerts)


def team_flavors(*, team: Team):
    """The flavors of the clusters the team has a namespace in (what its allowances and overrides can name)."""
    return (GpuFlavor.objects.filter(cluster__team_namespaces__team=team,
                                     cluster__team_namespaces__deleted_at__isnull=True)
            .select_related("cluster").distinct().order_by("cluster__name", "name"))


def team_budgets(*, team: Team):
    return Budget.objects.filter(team=team).order_by("-month")


# --- series for the charts -----------------------------------------------------------------------------------


def team_daily_usage(*, team: Team, start: datetime, end: datetime) -> list[dict]:
    """GPU-hours per day and flavor: [{day, flavor, allocated, used}]."""
    rows = (UsageHour.objects.filter(team=team, hour__gte=start, hour__lt=end)
            .annotate(day=TruncDate("hour")).values("day", "flavor__name")
            .annotate(allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours")).order_by("day", "flavor__name"))
    return [{"day": r["day"], "flavor": r["flavor__name"], "allocated": r["allocated"], "used": r["used"]}
            for r in rows]


def team_daily_cost(*, team: Team, month: date) -> list[dict]:
    """Cost per day of the month (each hour at its rate): [{day, cost}], from one aggregate query."""
    start, end = month_bounds(month)
    periods = price_periods(start=start, end=end)
    rows = UsageHour.objects.filter(team=team).annotate(day=TruncDate("hour"))
    per_day: dict[date, Decimal] = defaultdict(Decimal)
    for row in usage_sums(rows, by=("day", "flavor_id"), start=start, end=end, periods=periods):
        if row["period"] != UNPRICED:
            per_day[row["day"]] += row["allocated"] * periods[row["period"]].price
    return [{"day": day, "cost": money(cost)} for day, cost in sorted(per_day.items())]


def cluster_daily_utilisation(*, start: datetime, end: datetime) -> list[dict]:
    """Per cluster and day: allocated and used GPU-hours and their ratio."""
    rows = (UsageHour.objects.filter(hour__gte=start, hour__lt=end).annotate(day=TruncDate("hour"))
            .values("day", "cluster__name").annotate(allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours"))
            .order_by("day", "cluster__name"))
    return [{"day": r["day"], "cluster": r["cluster__name"], "allocated": r["allocated"], "used": r["used"],
             "utilisation": float(r["used"] / r["allocated"]) if r["allocated"] else 0.0} for r in rows]


def team_day_utilisation(*, user, start: datetime, end: datetime) -> list[dict]:
    """The heatmap's cells: per team (slug) and day, used ÷ allocated."""
    rows = (UsageHour.objects.filter(team__in=team_list(user=user), hour__gte=start, hour__lt=end)
            .annotate(day=TruncDate("hour")).values("day", "team__slug")
            .annotate(allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours")).order_by("team__slug", "day"))
    return [{"day": r["day"], "team": r["team__slug"],
             "utilisation": float(r["used"] / r["allocated"]) if r["allocated"] else 0.0} for r in rows]


# --- idle GPUs -----------------------------------------------------------------------------------------------


@dataclass
class IdleJob:
    job: Job
    window_start: datetime
    window_end: datetime
    utilisation_max: float
    wasted_gpu_hours: Decimal
    wasted_cost: Decimal
    cost_per_hour: Decimal | None  # what the job's GPUs cost each hour while it keeps running
    verdict: activity.Verdict | None = None
    signal: str = ""  # the weakest signal of the window's hours


def idle_jobs(*, user, team: Team | None = None, now: datetime | None = None) -> list[IdleJob]:
    """Running jobs that did no work (activity.judge_idle on their peak hour, memory held or not) in every hour of
    the last IDLE_GPU_WINDOW_HOURS collected hours (the window ends at the newest hour collected before now; a job
    needs a row for each hour)."""
    now = now or timezone.now()
    window = settings.IDLE_GPU_WINDOW_HOURS
    newest = JobUsageHour.objects.filter(hour__lt=floor_hour(now)).aggregate(newest=Max("hour"))["newest"]
    if newest is None:
        return []
    window_start, window_end = newest - (window - 1) * HOUR, newest + HOUR
    jobs = job_list(user=user, team=team).filter(state=JobState.RUNNING)
    sums = (JobUsageHour.objects.filter(job__in=jobs, hour__gte=window_start, hour__lt=window_end)
            .values("job_id").annotate(hours=Count("hour", distinct=True), allocated=Sum("allocated_gpu_hours"),
                                       used=Sum("used_gpu_hours"), peak=Max("utilisation_avg"),
                                       memory=Max("gpu_memory_used_gib_avg"),
                                       # Field names sort best last, so the minimum is the weakest signal.
                                       signal=Min("utilisation_signal"))
            .filter(hours=window).order_by())
    verdicts = {row["job_id"]: (row, activity.judge_idle(
        signal=row["signal"], utilisation=row["peak"] or 0.0, threshold=settings.IDLE_GPU_THRESHOLD,
        # the GPUs it held on average over the window (each hour's allocation is GPU-hours of one hour)
        memory_gib=(row["memory"] or 0.0) / max(float(row["allocated"] or 0) / window, 1e-9))) for row in sums}
    verdicts = {pk: found for pk, found in verdicts.items() if found[1].idle}
    if not verdicts:
        return []
    periods = price_periods(start=window_start, end=window_end + HOUR)
    result = []
    for job in jobs.filter(pk__in=verdicts):
        row, verdict = verdicts[job.pk]
        wasted = (row["allocated"] or ZERO) - (row["used"] or ZERO)
        period = next((p for p in reversed(periods) if p.flavor_id == job.flavor_id), None)
        price = period.price if period else None
        result.append(IdleJob(job=job, window_start=window_start, window_end=window_end,
                              utilisation_max=row["peak"] or 0.0, wasted_gpu_hours=wasted,
                              wasted_cost=money(wasted * price) if price is not None else ZERO,
                              cost_per_hour=money(job.total_gpus * price) if price is not None else None,
                              verdict=verdict, signal=row["signal"]))
    return sorted(result, key=lambda i: (-i.wasted_gpu_hours, i.job.pk))


@dataclass
class IdleReport:
    jobs: list[IdleJob]
    # Clusters whose newest hour was read from a time-based signal: a job running only tiny kernels reads busy there
    # and is missing from `jobs`.
    time_based_clusters: list[str]
    caveat: str = activity.TINY_KERNELS


def cluster_signals(*, clusters=None):
    """Clusters with the signal (`utilisation_signal`) and activity fields (`activity_fields`) of their newest
    collected hour, and that hour (`signal_hour`); None where no hour was collected."""
    newest = (CollectedHour.objects.filter(cluster=OuterRef("pk")).exclude(state=HourState.FAILED)
              .order_by("-hour"))
    clusters = Cluster.objects.all() if clusters is None else clusters
    return clusters.annotate(utilisation_signal=Subquery(newest.values("utilisation_signal")[:1]),
                             activity_fields=Subquery(newest.values("activity_fields")[:1]),
                             signal_hour=Subquery(newest.values("hour")[:1]))


@dataclass
class ClusterSignal:
    """The signal a cluster's newest collected hour was read from, the activity fields reported all that hour, and
    since when the signal has been the same (None for both hours when nothing was collected)."""

    signal: str
    fields: list[str]
    hour: datetime | None
    since: datetime | None

    @property
    def label(self) -> str:
        return activity.signal_label(self.signal)

    @property
    def time_based(self) -> bool:
        return activity.time_based(self.signal)


def cluster_signal(*, cluster: Cluster) -> ClusterSignal:
    ledger = CollectedHour.objects.filter(cluster=cluster).exclude(state=HourState.FAILED)
    newest = ledger.order_by("-hour").first()
    if newest is None:
        return ClusterSignal("", [], None, None)
    other = (ledger.filter(hour__lt=newest.hour).exclude(utilisation_signal=newest.utilisation_signal)
             .order_by("-hour").values_list("hour", flat=True).first())
    same = ledger.filter(utilisation_signal=newest.utilisation_signal)
    since = (same.filter(hour__gt=other) if other else same).order_by("hour").values_list("hour", flat=True).first()
    return ClusterSignal(newest.utilisation_signal, list(newest.activity_fields), newest.hour, since)


def job_activity(*, job: Job, hours: int = 72) -> list[dict]:
    """The job's newest `hours` collected hours, oldest first: utilisation on the hour's signal, SM and tensor-pipe
    activity where exported (None where not), memory per GPU, what SM and tensor activity say together, and the
    idle verdict."""
    rows = JobUsageHour.objects.filter(job=job).order_by("-hour")[:hours]
    found = []
    for row in reversed(rows):
        gpus = float(row.allocated_gpu_hours) or 1e-9
        memory = row.gpu_memory_used_gib_avg / gpus
        found.append({
            "hour": row.hour, "signal": row.utilisation_signal, "label": activity.signal_label(row.utilisation_signal),
            "utilisation": row.utilisation_avg, "sm_active": row.sm_active_avg, "tensor_active": row.tensor_active_avg,
            "memory_gib": memory,
            "note": activity.tensor_note(sm_active=row.sm_active_avg, tensor_active=row.tensor_active_avg,
                                         threshold=settings.IDLE_GPU_THRESHOLD),
            "verdict": activity.judge_idle(signal=row.utilisation_signal, utilisation=row.utilisation_avg,
                                           memory_gib=memory, threshold=settings.IDLE_GPU_THRESHOLD)})
    return found


def idle_report(*, user, team: Team | None = None, now: datetime | None = None) -> IdleReport:
    jobs = idle_jobs(user=user, team=team, now=now)
    clusters = (Cluster.objects.filter(team_namespaces__team=team) if team is not None
                else Cluster.objects.filter(active=True))
    weak = [c.name for c in cluster_signals(clusters=clusters.distinct().order_by("name"))
            if c.signal_hour is not None and activity.time_based(c.utilisation_signal)]
    return IdleReport(jobs=jobs, time_based_clusters=weak)
