"""Statements: a team's month as lines per flavor and rate period, with allocated and used GPU-hours, cost and
idle cost; roll-ups per team, cost centre and department; the hours the collection has not got yet.

Each line is rounded to the cent once, and totals are the sums of the rounded lines, so a statement always adds up.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Max, Min, Sum
from django.utils import timezone

from jobs.choices import JobKind
from tenants.models import Cluster, GpuFlavor, Team, TeamNamespace
from tenants.selectors import team_list

from . import activity
from .choices import HourState, StatementState
from .models import CollectedHour, JobUsageHour, UsageHour
from .pricing import (
    GPU_HOURS_PLACES,
    HOUR,
    UNPRICED,
    ZERO,
    PricePeriod,
    current_month,
    floor_hour,
    hours_between,
    money,
    month_bounds,
    price_periods,
    usage_sums,
)

# --- statements ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignalSpan:
    """The hours [start, end) of a line whose "used" GPU-hours were read from one activity field."""

    signal: str  # a UtilisationSignal, '' for rows collected before the collector recorded it
    start: datetime
    end: datetime

    @property
    def label(self) -> str:
        return activity.signal_label(self.signal)

    @property
    def time_based(self) -> bool:
        return activity.time_based(self.signal)


def describe_signals(spans: list[SignalSpan]) -> str:
    """One field name, or each field with its hours when the signal changed within the period."""
    if len({span.signal for span in spans}) <= 1:
        return spans[0].signal if spans else ""
    return "; ".join(f"{span.signal or 'unrecorded'} {span.start:%Y-%m-%dT%H:%M:%SZ}/{span.end:%Y-%m-%dT%H:%M:%SZ}"
                     for span in spans)


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
    # What "used" was read from, in time order; more than one signal means the exporter changed in the period.
    signals: list[SignalSpan] = field(default_factory=list)
    # The part of the GPU-hours that interactive workspaces held and used (the rest: jobs).
    workspace_gpu_hours: Decimal = Decimal(0)
    workspace_used_gpu_hours: Decimal = Decimal(0)

    @property
    def utilisation_signal(self) -> str:
        return describe_signals(self.signals)

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
    # Still inside the backfill window, so the collector will try it again; older gaps stay as they are.
    retryable: bool = True

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
    first_usage: datetime | None = None  # the month's first hour with usage (a team may predate its portal row)

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
    def retryable_hour_count(self) -> int:
        return len({m.start + i * HOUR for m in self.missing if m.retryable for i in range(m.hours)})

    @property
    def state_label(self) -> str:
        return StatementState(self.state).label

    @property
    def signals(self) -> list[SignalSpan]:
        """Each signal "used" was read from this month, from its first to its last hour over every line."""
        spans: dict[str, SignalSpan] = {}
        for span in (span for line in self.lines for span in line.signals):
            seen = spans.get(span.signal)
            spans[span.signal] = span if seen is None else SignalSpan(span.signal, min(seen.start, span.start),
                                                                      max(seen.end, span.end))
        return sorted(spans.values(), key=lambda span: (span.start, span.signal))

    @property
    def signal_changed(self) -> bool:
        return len(self.signals) > 1

    @property
    def time_based_signal(self) -> bool:
        return any(span.time_based for span in self.signals)


def statement_state(month: date, now: datetime | None = None, missing: list[MissingHours] = ()) -> str:
    """Draft while the month is open; then awaiting collection while any of its hours is missing or partial and
    will still be collected again; final only after that."""
    if (now or timezone.now()) < month_bounds(month)[1]:
        return StatementState.DRAFT
    return StatementState.PENDING if any(m.retryable for m in missing) else StatementState.FINAL


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
                         used_gpu_hours=used, cost=cost, idle_cost=cost - money(used * period.price))


def statements_for(*, teams, month: date, now: datetime | None = None) -> dict[int, Statement]:
    """The month's statement of each of `teams` (a queryset or list), from one aggregate query; its state and missing
    hours come from the collection ledger of the clusters the team has a namespace in (read once per cluster)."""
    start, end = month_bounds(month)
    teams = list(teams)
    flavors = {f.pk: f for f in GpuFlavor.objects.select_related("cluster").order_by("pk")}
    periods = price_periods(start=start, end=end, flavors=list(flavors.values()))
    statements = {t.pk: Statement(team=t, month=month, start=start, end=end, state=StatementState.DRAFT,
                                  currency=settings.BILLING_CURRENCY) for t in teams}
    # Testing every row against a long list of teams costs more than summing every team and dropping the others.
    few = len(teams) <= 50
    rows = UsageHour.objects.filter(team__in=list(statements)) if few else UsageHour.objects.all()
    # Lines come out in statement order (cluster, flavor, rate period) when the sums are taken in that order.
    rank = {pk: i for i, pk in enumerate(sorted(flavors, key=lambda pk: (flavors[pk].cluster.name, flavors[pk].name)))}
    sums, spans, firsts = _usage(rows, start=start, end=end, periods=periods)
    sums.sort(key=lambda s: (rank[s["flavor_id"]], periods[s["period"]].start if s["period"] != UNPRICED else start))
    for row in sums:
        statement = statements.get(row["team_id"])
        if statement is not None:
            period = periods[row["period"]] if row["period"] != UNPRICED else None
            line = _line(flavors[row["flavor_id"]], row, period, start, end)
            line.signals = [SignalSpan(span.signal, max(span.start, line.charge_start), min(span.end, line.charge_end))
                            for span in spans.get((row["team_id"], row["flavor_id"]), [])
                            if span.start < line.charge_end and span.end > line.charge_start]
            statement.lines.append(line)
    _workspace_parts(statements, start=start, end=end)
    for team_id, first in firsts.items():
        if team_id in statements:
            statements[team_id].first_usage = first
    # Each team sees the gaps of the clusters it has a namespace in.
    namespaces = TeamNamespace.objects.filter(team__in=list(statements)) if few else TeamNamespace.objects.all()
    team_clusters = defaultdict(set)
    for team_id, cluster_id in namespaces.values_list("team_id", "cluster_id"):
        team_clusters[team_id].add(cluster_id)
    clusters = list(Cluster.objects.filter(pk__in={c for t in statements for c in team_clusters[t]}))
    missing = missing_hours(clusters=clusters, start=start, end=min(end, floor_hour(now or timezone.now())), now=now)
    names = {c.pk: c.name for c in clusters}
    by_clusters: dict[frozenset, list[MissingHours]] = {}  # teams in the same clusters share one list and state
    for statement in statements.values():
        mine = frozenset(names[c] for c in team_clusters[statement.team.pk])
        if mine not in by_clusters:
            by_clusters[mine] = [m for m in missing if m.cluster in mine]
        statement.missing = list(by_clusters[mine])
        statement.state = statement_state(month, now, statement.missing)
    return statements


WORKSPACE = JobKind.WORKSPACE.value


def _workspace_parts(statements: dict[int, Statement], *, start: datetime, end: datetime) -> None:
    """Each line's GPU-hours held by workspaces (jobs of kind `workspace`), from one aggregate query."""
    found = (JobUsageHour.objects.filter(job__kind=WORKSPACE, job__team__in=list(statements), hour__gte=start,
                                         hour__lt=end)
             .values("job__team_id", "flavor_id", "hour").order_by()
             .annotate(allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours")))
    for row in found:
        for line in statements[row["job__team_id"]].lines:
            if line.flavor.pk == row["flavor_id"] and line.charge_start <= row["hour"] < line.charge_end:
                line.workspace_gpu_hours += _gpu_hours(row["allocated"])
                line.workspace_used_gpu_hours += _gpu_hours(row["used"])


def _usage(rows, *, start: datetime, end: datetime, periods: list[PricePeriod]):
    """From one aggregate query over the month's rows: the sums per (team, flavor, rate period), the hours each
    utilisation signal covered per (team, flavor) in time order, and each team's first hour with usage."""
    sums: dict[tuple, dict] = {}
    spans: dict[tuple, dict[str, SignalSpan]] = defaultdict(dict)
    firsts: dict[int, datetime] = {}
    for row in usage_sums(rows, by=("team_id", "flavor_id", "utilisation_signal"), start=start, end=end,
                          periods=periods, also={"first": Min("hour"), "last": Max("hour")}):
        key = (row["team_id"], row["flavor_id"], row["period"])
        line = sums.setdefault(key, {"team_id": key[0], "flavor_id": key[1], "period": key[2], "allocated": ZERO,
                                     "used": ZERO})
        line["allocated"] += row["allocated"]
        line["used"] += row["used"]
        spans[key[:2]][row["utilisation_signal"]] = SignalSpan(row["utilisation_signal"], row["first"],
                                                               row["last"] + HOUR)
        firsts[key[0]] = min(firsts.get(key[0], row["first"]), row["first"])
    ordered = {group: sorted(found.values(), key=lambda span: span.start) for group, found in spans.items()}
    return list(sums.values()), ordered, firsts


def first_month(*, team: Team | None = None) -> date:
    """The first month with anything to show: the team's first usage or its creation (for the console, the first
    usage or cluster anywhere), so "previous month" stops there instead of paging back through empty months."""
    rows = UsageHour.objects.filter(team=team) if team is not None else UsageHour.objects.all()
    moments = [rows.aggregate(first=Min("hour"))["first"]]
    if team is not None:
        moments.append(team.created_at)
    else:
        moments.append(Cluster.objects.aggregate(first=Min("created_at"))["first"])
    known = [m for m in moments if m is not None]
    return current_month(min(known)) if known else current_month()


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


def retry_from(now: datetime | None = None) -> datetime:
    """The first hour the collector still collects again (the backfill window's start)."""
    return floor_hour(now or timezone.now()) - timedelta(days=settings.BILLING_BACKFILL_DAYS)


def missing_hours(*, clusters: list[Cluster], start: datetime, end: datetime,
                  now: datetime | None = None) -> list[MissingHours]:
    """Hours of [start, end) not collected in full for each cluster (from the hour it was added), as runs of
    consecutive hours with the same state and message, each saying whether the collector will try it again."""
    if end <= start or not clusters:
        return []
    known = {(c, h): (s, m) for c, h, s, m in CollectedHour.objects.filter(
        cluster__in=clusters, hour__gte=start, hour__lt=end).values_list("cluster_id", "hour", "state", "message")}
    cutoff = retry_from(now)
    runs: list[MissingHours] = []
    for cluster in sorted(clusters, key=lambda c: c.name):
        hour = max(start, floor_hour(cluster.created_at))
        while hour < end:
            retryable = hour >= cutoff
            state, message = known.get((cluster.pk, hour), ("missing", ""))
            if state == "missing":
                message = ("not collected yet" if retryable else
                           f"never collected, and older than the {settings.BILLING_BACKFILL_DAYS}-day backfill window")
            if state != HourState.COLLECTED:
                last = runs[-1] if runs else None
                if (last and last.cluster == cluster.name and last.end == hour and last.state == state
                        and last.message == message and last.retryable == retryable):
                    last.end = hour + HOUR
                else:
                    runs.append(MissingHours(cluster=cluster.name, start=hour, end=hour + HOUR, state=state,
                                             message=message, retryable=retryable))
            hour += HOUR
    return runs


