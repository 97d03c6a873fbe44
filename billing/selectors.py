"""Reads for usage and money: rates in force, statements, budgets, forecasts, missing hours and idle GPUs.

Statements come from one aggregate query per call: usage rows grouped by team, flavor and the rate period each
hour falls in (a CASE over the few periods of the month), so every hour is priced at the rate in force then and
the database does the heavy summing. Prices multiply the period sums in Decimal, exactly; each line is rounded
once, and totals are the sums of the rounded lines, so a statement always adds up.
"""

from __future__ import annotations

import calendar
import csv
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import BooleanField, Count, ExpressionWrapper, Max, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from jobs.choices import JobState
from jobs.models import Job
from portal.limits import EARLIEST_YEAR, LATEST_YEAR, year_in_range
from tenants.models import Cluster, GpuFlavor, Team, TeamNamespace
from tenants.selectors import team_list

from .choices import HourState, StatementState
from .models import Budget, BudgetAlert, CollectedHour, JobUsageHour, RateCard, UsageHour

CENT = Decimal("0.01")
GPU_HOURS_PLACES = Decimal("0.000001")
ZERO = Decimal(0)
HOUR = timedelta(hours=1)
MONTH_RE = re.compile(r"^(\d{4})-(\d{2})$")
UNPRICED = -1  # the period index of hours no rate card covers


def money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


# --- months and hours ----------------------------------------------------------------------------------------


def parse_month(value: str) -> date:
    """'2026-11' → date(2026, 11, 1); anything else is a ValidationError that says what is expected."""
    match = MONTH_RE.match((value or "").strip())
    if not match or not 1 <= int(match[2]) <= 12 or not year_in_range(int(match[1])):
        raise ValidationError(f"'{value}' is not a month: use YYYY-MM from {EARLIEST_YEAR}-01 to {LATEST_YEAR}-12, "
                              "e.g. 2026-11.")
    return date(int(match[1]), int(match[2]), 1)


def current_month(now: datetime | None = None) -> date:
    now = now or timezone.now()
    return date(now.year, now.month, 1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """The month as [start, end) in UTC."""
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    days = calendar.monthrange(month.year, month.month)[1]
    return start, start + timedelta(days=days)


def floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hours_between(start: datetime, end: datetime) -> int:
    return max(0, int((end - start) / HOUR))


# --- rates ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PricePeriod:
    """The price of one unit-hour of a flavor over [start, end); `parent` names the flavor it derives from."""

    flavor_id: int
    start: datetime
    end: datetime
    price: Decimal
    currency: str
    parent: str = ""


def parent_flavor(flavor: GpuFlavor, cluster_flavors: list[GpuFlavor]) -> GpuFlavor | None:
    """The whole GPU a fractional flavor (a MIG slice) is cut from: a whole-GPU flavor of the same cluster with the
    same GPU model, or the cluster's only whole-GPU flavor; None when that is ambiguous or absent."""
    if flavor.gpu_fraction >= 1:
        return None
    whole = [f for f in cluster_flavors
             if f.cluster_id == flavor.cluster_id and f.gpu_fraction >= 1 and f.resource_name == "nvidia.com/gpu"]
    same_model = [f for f in whole if flavor.gpu_model and f.gpu_model == flavor.gpu_model]
    if len(same_model) == 1:
        return same_model[0]
    return whole[0] if len(whole) == 1 else None


def _subtract(start: datetime, end: datetime, taken: list[tuple[datetime, datetime]]):
    """[start, end) minus the (sorted, disjoint) taken intervals."""
    cursor = start
    for t_start, t_end in taken:
        if t_end <= cursor or t_start >= end:
            continue
        if t_start > cursor:
            yield cursor, t_start
        cursor = max(cursor, t_end)
    if cursor < end:
        yield cursor, end


def price_periods(*, start: datetime, end: datetime, flavors: list[GpuFlavor] | None = None) -> list[PricePeriod]:
    """Every priced period of [start, end), clipped to it: explicit rate cards first; a MIG slice without its own
    card for some hours gets its parent GPU's rate × its fraction for those hours."""
    flavors = list(GpuFlavor.objects.order_by("pk")) if flavors is None else flavors
    cards = RateCard.objects.filter(effective_from__lt=end).filter(
        Q(effective_to__isnull=True) | Q(effective_to__gt=start)).order_by("flavor_id", "effective_from")
    explicit = defaultdict(list)
    for card in cards:
        explicit[card.flavor_id].append(PricePeriod(
            flavor_id=card.flavor_id, start=max(card.effective_from, start),
            end=min(card.effective_to or end, end), price=card.price_per_gpu_hour, currency=card.currency))
    periods = [p for flavor in flavors for p in explicit.get(flavor.pk, [])]
    for flavor in flavors:
        parent = parent_flavor(flavor, flavors)
        if parent is None:
            continue
        taken = [(p.start, p.end) for p in explicit.get(flavor.pk, [])]
        for p in explicit.get(parent.pk, []):
            periods += [PricePeriod(flavor_id=flavor.pk, start=s, end=e, price=p.price * flavor.gpu_fraction,
                                    currency=p.currency, parent=parent.name)
                        for s, e in _subtract(p.start, p.end, taken)]
    return sorted(periods, key=lambda p: (p.flavor_id, p.start))


def rate_cards(*, flavor: GpuFlavor | None = None):
    cards = RateCard.objects.select_related("flavor__cluster")
    return (cards.filter(flavor=flavor) if flavor else cards).order_by("flavor__cluster__name", "flavor__name",
                                                                         "-effective_from")


def rate_in_force(*, flavor: GpuFlavor, at: datetime) -> PricePeriod | None:
    periods = price_periods(start=floor_hour(at), end=floor_hour(at) + HOUR,
                            flavors=list(GpuFlavor.objects.filter(cluster_id=flavor.cluster_id)))
    return next((p for p in periods if p.flavor_id == flavor.pk), None)


# --- the aggregate -------------------------------------------------------------------------------------------


def segments(*, start: datetime, end: datetime, periods: list[PricePeriod]) -> list[tuple[datetime, datetime]]:
    """[start, end) cut at every period boundary of any flavor: within one segment each flavor has one price."""
    cuts = sorted({start, end} | {p.start for p in periods} | {p.end for p in periods})
    cuts = [c for c in cuts if start <= c <= end]
    return list(zip(cuts, cuts[1:], strict=False))


def usage_sums(rows, *, by: tuple[str, ...], start: datetime, end: datetime,
               periods: list[PricePeriod]) -> list[dict]:
    """One aggregate query over usage `rows`: allocated and used GPU-hours per `by` group and rate period.

    Rows are grouped by `by` plus one boolean per price change inside the range ("at or after the change"), so the
    database sums each segment in a single pass. Booleans keep the planner's group estimate right (it hashes);
    grouping by a CASE over the periods made it guess badly and sort to disk.
    """
    segs = segments(start=start, end=end, periods=periods)
    flags = {f"after_{k}": ExpressionWrapper(Q(hour__gte=s_start), output_field=BooleanField())
             for k, (s_start, _) in enumerate(segs[1:], start=1)}
    period_of = {}  # (flavor_id, segment) → index into periods
    for i, p in enumerate(periods):
        for k, (s_start, s_end) in enumerate(segs):
            if p.start <= s_start and s_end <= p.end:
                period_of[(p.flavor_id, k)] = i
    merged: dict[tuple, dict] = {}
    query = (rows.filter(hour__gte=start, hour__lt=end).annotate(**flags).values(*by, *flags)
             .annotate(allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours")).order_by())
    for row in query:
        segment = sum(1 for flag in flags if row[flag])  # the segments are in order, so the flags count them
        group = tuple(row[f] for f in by)
        period = period_of.get((row["flavor_id"], segment), UNPRICED)
        entry = merged.get(group + (period,))
        if entry is None:
            entry = merged[group + (period,)] = {**dict(zip(by, group, strict=True)), "period": period,
                                                 "allocated": ZERO, "used": ZERO}
        entry["allocated"] += row["allocated"] or ZERO
        entry["used"] += row["used"] or ZERO
    return list(merged.values())


# --- statements ----------------------------------------------------------------------------------------------


@dataclass
class StatementLine:
    """One flavor over one rate period of the month (most months: one line per flavor)."""

    flavor: GpuFlavor
    charge_start: datetime
    charge_end: datetime
    unit_price: Decimal | None
    currency: str
    price_from: str  # "" for the flavor's own rate card, else the parent flavor's name
    allocated_gpu_hours: Decimal
    used_gpu_hours: Decimal
    cost: Decimal  # allocation cost, rounded once
    idle_cost: Decimal  # the part of `cost` nobody used: cost − used × price, so the two always add up

    @property
    def efficiency(self) -> Decimal | None:
        if not self.allocated_gpu_hours:
            return None
        return (self.used_gpu_hours / self.allocated_gpu_hours).quantize(Decimal("0.0001"))

    @property
    def idle_gpu_hours(self) -> Decimal:
        return self.allocated_gpu_hours - self.used_gpu_hours

    @property
    def priced(self) -> bool:
        return self.unit_price is not None


@dataclass
class MissingHours:
    cluster: str
    start: datetime
    end: datetime
    state: str  # "missing" (never collected) or an HourState
    message: str = ""

    @property
    def hours(self) -> int:
        return hours_between(self.start, self.end)


@dataclass
class Statement:
    team: Team
    month: date
    start: datetime
    end: datetime
    state: str
    currency: str
    lines: list[StatementLine] = field(default_factory=list)
    missing: list[MissingHours] = field(default_factory=list)

    @property
    def total_cost(self) -> Decimal:
        return sum((line.cost for line in self.lines), ZERO)

    @property
    def total_idle_cost(self) -> Decimal:
        return sum((line.idle_cost for line in self.lines), ZERO)

    @property
    def allocated_gpu_hours(self) -> Decimal:
        return sum((line.allocated_gpu_hours for line in self.lines), ZERO)

    @property
    def used_gpu_hours(self) -> Decimal:
        return sum((line.used_gpu_hours for line in self.lines), ZERO)

    @property
    def efficiency(self) -> Decimal | None:
        allocated = self.allocated_gpu_hours
        return (self.used_gpu_hours / allocated).quantize(Decimal("0.0001")) if allocated else None

    @property
    def unpriced_gpu_hours(self) -> Decimal:
        return sum((line.allocated_gpu_hours for line in self.lines if not line.priced), ZERO)

    @property
    def missing_hour_count(self) -> int:
        """Hours in which at least one of the team's clusters is not collected."""
        return len({m.start + i * HOUR for m in self.missing for i in range(m.hours)})

    @property
    def is_final(self) -> bool:
        return self.state == StatementState.FINAL

    @property
    def state_label(self) -> str:
        return StatementState(self.state).label


def statement_state(month: date, now: datetime | None = None) -> str:
    return StatementState.FINAL if (now or timezone.now()) >= month_bounds(month)[1] else StatementState.DRAFT


def _gpu_hours(value) -> Decimal:
    # Sums keep the column's six places whatever the database returns (SQLite hands back floats).
    return Decimal(value or 0).quantize(GPU_HOURS_PLACES)


def _line(flavor, sums: dict, period: PricePeriod | None, start, end) -> StatementLine:
    allocated, used = _gpu_hours(sums["allocated"]), _gpu_hours(sums["used"])
    if period is None:
        return StatementLine(flavor=flavor, charge_start=start, charge_end=end, unit_price=None,
                             currency=settings.BILLING_CURRENCY, price_from="", allocated_gpu_hours=allocated,
                             used_gpu_hours=used, cost=ZERO, idle_cost=ZERO)
    cost = money(allocated * period.price)
    return StatementLine(flavor=flavor, charge_start=period.start, charge_end=period.end, unit_price=period.price,
                         currency=period.currency, price_from=period.parent, allocated_gpu_hours=allocated,
                         used_gpu_hours=used, cost=cost,
                         idle_cost=cost - money(used * period.price))


def statements_for(*, teams, month: date, now: datetime | None = None,
                   with_missing: bool = True) -> dict[int, Statement]:
    """The month's statement of each of `teams` (a queryset or list), from one aggregate query."""
    start, end = month_bounds(month)
    teams = list(teams)
    flavors = {f.pk: f for f in GpuFlavor.objects.select_related("cluster").order_by("pk")}
    periods = price_periods(start=start, end=end, flavors=list(flavors.values()))
    state = statement_state(month, now)
    statements = {t.pk: Statement(team=t, month=month, start=start, end=end, state=state,
                                  currency=settings.BILLING_CURRENCY) for t in teams}
    # Testing every row against a long list of teams costs more than summing every team and dropping the others.
    rows = UsageHour.objects.filter(team__in=[t.pk for t in teams]) if len(teams) <= 50 else UsageHour.objects.all()
    for sums in usage_sums(rows, by=("team_id", "flavor_id"), start=start, end=end, periods=periods):
        if sums["team_id"] not in statements:
            continue
        period = periods[sums["period"]] if sums["period"] != UNPRICED else None
        statements[sums["team_id"]].lines.append(_line(flavors[sums["flavor_id"]], sums, period, start, end))
    for statement in statements.values():
        statement.lines.sort(key=lambda line: (line.flavor.cluster.name, line.flavor.name, line.charge_start))
    if with_missing:
        # Each team sees the gaps of the clusters it has a namespace in.
        team_clusters = defaultdict(set)
        for team_id, cluster_id in TeamNamespace.objects.filter(team__in=teams).values_list("team_id", "cluster_id"):
            team_clusters[team_id].add(cluster_id)
        clusters = list(Cluster.objects.filter(pk__in={c for ids in team_clusters.values() for c in ids}))
        missing = missing_hours(clusters=clusters, start=start, end=min(end, floor_hour(now or timezone.now())))
        names = {c.pk: c.name for c in clusters}
        for statement in statements.values():
            mine = {names[c] for c in team_clusters[statement.team.pk]}
            statement.missing = [m for m in missing if m.cluster in mine]
    return statements


def team_statement(*, team: Team, month: date, now: datetime | None = None) -> Statement:
    return statements_for(teams=[team], month=month, now=now)[team.pk]


@dataclass
class RollupRow:
    key: str
    teams: int = 0
    allocated_gpu_hours: Decimal = ZERO
    used_gpu_hours: Decimal = ZERO
    cost: Decimal = ZERO
    idle_cost: Decimal = ZERO


def rollups(statements: list[Statement]) -> dict[str, list[RollupRow]]:
    """Cost per cost centre and per department (a team's parent; a team without one is its own department).
    Sums of the statements' rounded totals, so every roll-up adds up to the statements it covers."""
    result = {}
    for name, key_of in (("cost_center", lambda t: t.cost_center or "(none)"),
                         ("department", lambda t: t.parent.name if t.parent_id else t.name)):
        rows: dict[str, RollupRow] = {}
        for statement in statements:
            row = rows.setdefault(key_of(statement.team), RollupRow(key=key_of(statement.team)))
            row.teams += 1
            row.allocated_gpu_hours += statement.allocated_gpu_hours
            row.used_gpu_hours += statement.used_gpu_hours
            row.cost += statement.total_cost
            row.idle_cost += statement.total_idle_cost
        result[name] = sorted(rows.values(), key=lambda r: (-r.cost, r.key))
    return result


def all_statements(*, user, month: date, now: datetime | None = None) -> list[Statement]:
    """Every team the user may see (platform admins: all), teams archived since included."""
    teams = team_list(user=user).select_related("parent")
    return sorted(statements_for(teams=teams, month=month, now=now).values(), key=lambda s: s.team.slug)


# --- the collection ledger -----------------------------------------------------------------------------------


def missing_hours(*, clusters: list[Cluster], start: datetime, end: datetime) -> list[MissingHours]:
    """Hours of [start, end) not collected for each cluster, as runs of consecutive hours with the same state."""
    if end <= start or not clusters:
        return []
    known = {(c, h): (s, m) for c, h, s, m in CollectedHour.objects.filter(
        cluster__in=clusters, hour__gte=start, hour__lt=end).values_list("cluster_id", "hour", "state", "message")}
    runs: list[MissingHours] = []
    for cluster in sorted(clusters, key=lambda c: c.name):
        hour = start
        while hour < end:
            state, message = known.get((cluster.pk, hour), ("missing", ""))
            if state != HourState.COLLECTED:
                last = runs[-1] if runs else None
                if last and last.cluster == cluster.name and last.end == hour and last.state == state:
                    last.end = hour + HOUR
                else:
                    runs.append(MissingHours(cluster=cluster.name, start=hour, end=hour + HOUR, state=state,
                                             message=message))
            hour += HOUR
    return runs


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
    """End-of-month spend at the current burn rate: cost per collected hour so far × the hours of the month.
    Hours not collected yet are left out of the rate, so a collection gap does not make the month look cheap."""
    if statement.is_final:
        return statement.total_cost
    now = now or timezone.now()
    elapsed = hours_between(statement.start, min(statement.end, floor_hour(now)))
    covered = elapsed - statement.missing_hour_count
    if covered <= 0:
        return statement.total_cost
    month_hours = hours_between(statement.start, statement.end)
    return money(statement.total_cost / Decimal(covered) * month_hours)


def budget_status(*, team: Team, statement: Statement, now: datetime | None = None) -> BudgetStatus:
    budget = Budget.objects.filter(team=team, month=statement.month).first()
    alerts = list(budget.alerts.order_by("threshold")) if budget else []
    return BudgetStatus(month=statement.month, budget=budget, spent=statement.total_cost,
                        forecast=forecast(statement, now), alerts=alerts)


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


def idle_jobs(*, user, team: Team | None = None, now: datetime | None = None) -> list[IdleJob]:
    """Running jobs whose utilisation stayed under IDLE_GPU_THRESHOLD in every hour of the last IDLE_GPU_WINDOW_HOURS
    collected hours (the window ends at the newest hour collected before now; a job needs a row for each hour)."""
    from jobs.selectors import job_list

    now = now or timezone.now()
    window = settings.IDLE_GPU_WINDOW_HOURS
    newest = JobUsageHour.objects.filter(hour__lt=floor_hour(now)).aggregate(newest=Max("hour"))["newest"]
    if newest is None:
        return []
    window_start, window_end = newest - (window - 1) * HOUR, newest + HOUR
    jobs = job_list(user=user, team=team).filter(state=JobState.RUNNING)
    sums = (JobUsageHour.objects.filter(job__in=jobs, hour__gte=window_start, hour__lt=window_end)
            .values("job_id").annotate(hours=Count("hour", distinct=True), allocated=Sum("allocated_gpu_hours"),
                                       used=Sum("used_gpu_hours"),
                                       busy=Count("id", filter=Q(utilisation_avg__gte=settings.IDLE_GPU_THRESHOLD)),
                                       peak=Max("utilisation_avg"))
            .filter(hours=window, busy=0).order_by())
    sums = {row["job_id"]: row for row in sums}
    if not sums:
        return []
    periods = price_periods(start=window_start, end=window_end + HOUR)
    result = []
    for job in jobs.filter(pk__in=sums):
        row = sums[job.pk]
        wasted = (row["allocated"] or ZERO) - (row["used"] or ZERO)
        period = next((p for p in reversed(periods) if p.flavor_id == job.flavor_id), None)
        price = period.price if period else None
        result.append(IdleJob(job=job, window_start=window_start, window_end=window_end,
                              utilisation_max=row["peak"] or 0.0, wasted_gpu_hours=wasted,
                              wasted_cost=money(wasted * price) if price is not None else ZERO,
                              cost_per_hour=money(job.total_gpus * price) if price is not None else None))
    return sorted(result, key=lambda i: (-i.wasted_gpu_hours, i.job.pk))


# --- exports -------------------------------------------------------------------------------------------------

# Column names after the FinOps FOCUS specification; portal-specific columns carry its `x_` prefix.
FOCUS_COLUMNS = [
    "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
    "ChargeDescription", "SubAccountId", "SubAccountName", "RegionName", "ResourceId", "ResourceName",
    "ResourceType", "SkuId", "ConsumedQuantity", "ConsumedUnit", "PricingQuantity", "PricingUnit", "ListUnitPrice",
    "BilledCost", "EffectiveCost", "BillingCurrency", "Tags", "x_CostCenter", "x_Department", "x_UsedGpuHours",
    "x_Efficiency", "x_IdleCost", "x_PriceFrom", "x_StatementState",
]


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def focus_rows(statement: Statement) -> list[dict]:
    """One row per statement line (a flavor over one rate period); BilledCost of the rows sums to the total."""
    team = statement.team
    department = team.parent.name if team.parent_id else ""
    rows = []
    for line in statement.lines:
        flavor = line.flavor
        rows.append({
            "BillingPeriodStart": _iso(statement.start), "BillingPeriodEnd": _iso(statement.end),
            "ChargePeriodStart": _iso(line.charge_start), "ChargePeriodEnd": _iso(line.charge_end),
            "ChargeCategory": "Usage",
            "ChargeDescription": f"{flavor.name} GPU allocation in {flavor.cluster.name}",
            "SubAccountId": team.slug, "SubAccountName": team.name, "RegionName": flavor.cluster.name,
            "ResourceId": f"{flavor.cluster.name}/{team.namespace}/{flavor.name}", "ResourceName": flavor.name,
            "ResourceType": "GPU", "SkuId": flavor.resource_name,
            "ConsumedQuantity": str(line.allocated_gpu_hours), "ConsumedUnit": "GPU-Hours",
            "PricingQuantity": str(line.allocated_gpu_hours), "PricingUnit": "GPU-Hours",
            "ListUnitPrice": "" if line.unit_price is None else str(line.unit_price),
            "BilledCost": str(line.cost), "EffectiveCost": str(line.cost), "BillingCurrency": line.currency,
            "Tags": json.dumps({"cost-center": team.cost_center, "department": department}, sort_keys=True),
            "x_CostCenter": team.cost_center, "x_Department": department,
            "x_UsedGpuHours": str(line.used_gpu_hours),
            "x_Efficiency": "" if line.efficiency is None else str(line.efficiency),
            "x_IdleCost": str(line.idle_cost), "x_PriceFrom": line.price_from, "x_StatementState": statement.state,
        })
    return rows


def statement_json(statement: Statement) -> dict:
    team = statement.team
    return {
        "team": team.slug, "team_name": team.name, "cost_center": team.cost_center,
        "department": team.parent.name if team.parent_id else None,
        "month": f"{statement.month:%Y-%m}", "state": statement.state, "currency": statement.currency,
        "billing_period": {"start": _iso(statement.start), "end": _iso(statement.end)},
        "lines": [{
            "cluster": line.flavor.cluster.name, "flavor": line.flavor.name, "resource": line.flavor.resource_name,
            "charge_period": {"start": _iso(line.charge_start), "end": _iso(line.charge_end)},
            "unit_price": None if line.unit_price is None else str(line.unit_price), "price_from": line.price_from,
            "allocated_gpu_hours": str(line.allocated_gpu_hours), "used_gpu_hours": str(line.used_gpu_hours),
            "efficiency": None if line.efficiency is None else str(line.efficiency),
            "cost": str(line.cost), "idle_cost": str(line.idle_cost),
        } for line in statement.lines],
        "totals": {"allocated_gpu_hours": str(statement.allocated_gpu_hours),
                   "used_gpu_hours": str(statement.used_gpu_hours), "cost": str(statement.total_cost),
                   "idle_cost": str(statement.total_idle_cost),
                   "unpriced_gpu_hours": str(statement.unpriced_gpu_hours)},
        "missing_hours": [{"cluster": m.cluster, "start": _iso(m.start), "end": _iso(m.end), "state": m.state,
                           "message": m.message} for m in statement.missing],
    }


def write_focus_csv(statements: list[Statement], stream) -> None:
    writer = csv.DictWriter(stream, fieldnames=FOCUS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for statement in statements:
        writer.writerows(focus_rows(statement))
