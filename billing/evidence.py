"""The evidence behind a quota decision, for a team and flavor over the last 30 days: what it was guaranteed and
borrowed hour by hour, what it held and used, how much of that sat idle and what the idle part cost, and the unmet
demand: the unit-hours its jobs spent waiting, split by why they waited.

Every figure comes from rows already kept: hourly usage (UsageHour), quota levels (QuotaLevel), job timelines (Job
submitted/admitted/finished) and the stretches of each wait with its reason (JobWait). The reads are a fixed number
of queries for any number of pairs, hours and jobs (`evidence_for` serves one request and the right-sizing table
alike); the arithmetic is done here, in Decimal, so hand-computed figures match to the digit.

Units: a flavor's unit is what its quota counts (a GPU, a MIG slice, a share), and billing prices unit-hours.
`*_unit_hours` are in those units; `*_gpu_hours` are whole-GPU equivalents (unit-hours × the flavor's fraction).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from math import ceil

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from jobs.choices import WaitReason
from jobs.models import Job, JobWait
from quotas.models import Quota, QuotaLevel
from tenants.choices import Role, TeamState
from tenants.models import GpuFlavor, Membership, Team
from tenants.selectors import is_platform_admin

from .models import UsageHour
from .pricing import GPU_HOURS_PLACES, HOUR, ZERO, floor_hour, money, price_periods

WINDOW_DAYS = 30
# What the suggested extra units must take off the quota waits: enough to remove most of them, not every last
# hour of the busiest day.
WAIT_CUT = Decimal("0.8")
REASONS = [r.value for r in WaitReason]


def percentile(values: list[Decimal], p: int) -> Decimal:
    """The nearest-rank percentile: the smallest value at least p % of the values are not above."""
    if not values:
        return ZERO
    ordered = sorted(values)
    return ordered[max(0, ceil(p * len(ordered) / 100) - 1)]


def _gh(value) -> Decimal:
    return Decimal(value).quantize(GPU_HOURS_PLACES)


@dataclass
class Evidence:
    team: Team
    flavor: GpuFlavor
    start: datetime
    end: datetime
    guaranteed_now: int
    burst_now: int
    hours: list[datetime]
    guaranteed: list[int]  # per hour: the level in force at its start
    allocated: list[Decimal]  # per hour: unit-hours held (the units held on average over the hour)
    used: list[Decimal]
    prices: list[Decimal | None]  # per hour: the price of a unit-hour (None: no rate card)
    waited_unit_hours: dict[str, Decimal]  # reason → unit-hours waited within the window
    quota_waiting: list[Decimal] = field(default_factory=list)  # per hour: unit-hours waited for quota
    currency: str = "USD"

    @property
    def fraction(self) -> Decimal:
        return self.flavor.fraction_decimal

    def gpu_hours(self, unit_hours: Decimal) -> Decimal:
        return _gh(unit_hours * self.flavor.fraction.numerator / self.flavor.fraction.denominator)

    @property
    def waited_gpu_hours(self) -> dict[str, Decimal]:
        return {reason: self.gpu_hours(value) for reason, value in self.waited_unit_hours.items()}

    @property
    def allocated_gpu_hours(self) -> Decimal:
        return self.gpu_hours(self.allocated_unit_hours)

    @property
    def used_gpu_hours(self) -> Decimal:
        return self.gpu_hours(self.used_unit_hours)

    @property
    def quota_waits_after_extra_gpu_hours(self) -> Decimal:
        return self.gpu_hours(self.waited_after(self.extra_units))

    @property
    def borrowed(self) -> list[Decimal]:
        return [max(ZERO, a - g) for a, g in zip(self.allocated, self.guaranteed, strict=True)]

    @property
    def allocated_unit_hours(self) -> Decimal:
        return _gh(sum(self.allocated, ZERO))

    @property
    def used_unit_hours(self) -> Decimal:
        return _gh(sum(self.used, ZERO))

    @property
    def idle_unit_hours(self) -> Decimal:
        return _gh(max(ZERO, self.allocated_unit_hours - self.used_unit_hours))

    @property
    def borrowed_unit_hours(self) -> Decimal:
        return _gh(sum(self.borrowed, ZERO))

    @property
    def idle_share(self) -> Decimal:
        if not self.allocated_unit_hours:
            return ZERO
        return (self.idle_unit_hours / self.allocated_unit_hours).quantize(Decimal("0.0001"))

    @property
    def idle_cost(self) -> Decimal:
        return money(sum(((a - u) * p for a, u, p in zip(self.allocated, self.used, self.prices, strict=True)
                          if p is not None), ZERO))

    @property
    def unpriced_hours(self) -> int:
        return sum(1 for a, p in zip(self.allocated, self.prices, strict=True) if a and p is None)

    @property
    def p50_units(self) -> Decimal:
        return percentile(self.allocated, 50)

    @property
    def p95_units(self) -> Decimal:
        return percentile(self.allocated, 95)

    @property
    def p95_of_guaranteed_percent(self) -> int | None:
        if not self.guaranteed_now:
            return None
        return round(100 * self.p95_units / self.guaranteed_now)

    @property
    def price_now(self) -> Decimal | None:
        return next((p for p in reversed(self.prices) if p is not None), None)

    def waited_after(self, extra: int) -> Decimal:
        """Quota waits left had the team held `extra` more units: each hour, up to `extra` unit-hours less."""
        return _gh(sum((max(ZERO, w - extra) for w in self.quota_waiting), ZERO))

    @property
    def extra_units(self) -> int:
        """The fewest more units that would have taken WAIT_CUT of the quota waits off (0 when none waited)."""
        total = self.waited_unit_hours[WaitReason.QUOTA]
        if not total:
            return 0
        for extra in range(1, ceil(max(self.quota_waiting)) + 1):
            if self.waited_after(extra) <= total * (1 - WAIT_CUT):
                return extra
        return ceil(max(self.quota_waiting))

    @property
    def recommended_guaranteed(self) -> int:
        """p95 of what the team held, less the share of it that sat idle, plus what its quota waits ask for."""
        busy = self.p95_units * (1 - self.idle_share)
        return max(0, ceil(busy - Decimal("0.000001")) + self.extra_units)

    def sentence(self) -> str:
        name, slug = self.flavor.name, self.team.slug
        p95 = _num(self.p95_units)
        if self.guaranteed_now:
            held = (f"{slug} used {self.p95_of_guaranteed_percent} % of its {self.guaranteed_now} {name} units at "
                    f"p95 ({p95} held)")
        else:
            held = f"{slug} holds no guaranteed {name} units and held {p95} at p95"
        quota = self.waited_unit_hours[WaitReason.QUOTA]
        if quota:
            extra = self.extra_units
            waits = (f"its jobs waited {_num(self.gpu_hours(quota))} GPU-hours for quota; {extra} more would have "
                     f"cut that to about {_num(self.gpu_hours(self.waited_after(extra)))}")
        else:
            waits = "its jobs never waited for quota"
        others = [f"{_num(self.gpu_hours(self.waited_unit_hours[r]))} GPU-hours for {r}"
                  for r in (WaitReason.PLACEMENT, WaitReason.BUDGET) if self.waited_unit_hours[r]]
        tail = f" (and {' and '.join(others)})" if others else ""
        return f"{held} and {waits}{tail}."


def _num(value: Decimal) -> str:
    """A figure as a sentence says it: whole above ten, one decimal below."""
    return f"{value:.0f}" if abs(value) >= 10 or value == value.to_integral_value() else f"{value:.1f}"


HOURS_PER_MONTH = 730  # 365 × 24 ÷ 12: a month's cost of one more unit held all month


@dataclass
class Recommendation:
    """A right-sizing row: the guaranteed quota the evidence supports and what changing to it costs a month."""

    evidence: Evidence

    @property
    def recommended(self) -> int:
        return self.evidence.recommended_guaranteed

    @property
    def delta(self) -> int:
        return self.recommended - self.evidence.guaranteed_now

    @property
    def monthly_cost_change(self) -> Decimal | None:
        price = self.evidence.price_now
        return None if price is None else money(self.delta * HOURS_PER_MONTH * price)

    @property
    def verdict(self) -> str:
        if self.delta > 0:
            return "under-provisioned"
        return "over-provisioned" if self.delta < 0 else "right-sized"


def can_see_rightsizing(*, user) -> bool:
    return is_platform_admin(user) or Membership.objects.filter(user=user, role=Role.ADMIN).exists()


def rightsizing(*, user, now: datetime | None = None) -> list[Recommendation]:
    """Every team × flavor the user may resize (platform admins: all; team admins: their teams') that holds a quota
    or used the flavor in the window, the largest changes first."""
    start, end = window(now)
    quotas = Quota.objects.filter(team__state=TeamState.ACTIVE)
    usage = UsageHour.objects.filter(hour__gte=start, hour__lt=end, team__state=TeamState.ACTIVE)
    if not is_platform_admin(user):
        admin_of = Membership.objects.filter(user=user, role=Role.ADMIN).values("team_id")
        quotas, usage = quotas.filter(team_id__in=admin_of), usage.filter(team_id__in=admin_of)
    keys = set(quotas.values_list("team_id", "flavor_id")) | set(usage.values_list("team_id", "flavor_id")
                                                                   .distinct().order_by())
    teams = Team.objects.in_bulk({t for t, _ in keys})
    flavors = GpuFlavor.objects.select_related("cluster").in_bulk({f for _, f in keys})
    pairs = sorted(((teams[t], flavors[f]) for t, f in keys),
                   key=lambda p: (p[0].slug, p[1].cluster.name, p[1].name))
    rows = [Recommendation(evidence=e) for e in evidence_for(pairs, now=now)]
    return sorted(rows, key=lambda r: (-abs(r.delta), r.evidence.team.slug, r.evidence.flavor.name))


def window(now: datetime | None = None) -> tuple[datetime, datetime]:
    end = floor_hour(now or timezone.now())
    return end - timedelta(days=WINDOW_DAYS), end


def evidence_for(pairs: list[tuple[Team, GpuFlavor]], *, now: datetime | None = None) -> list[Evidence]:
    """Evidence for each (team, flavor) pair: seven queries, however many pairs, hours and jobs."""
    if not pairs:
        return []
    now = now or timezone.now()
    start, end = window(now)
    hours = [start + i * HOUR for i in range(WINDOW_DAYS * 24)]
    team_ids = {t.pk for t, _ in pairs}
    flavor_ids = {f.pk for _, f in pairs}
    keys = {(t.pk, f.pk) for t, f in pairs}

    usage: dict[tuple, dict] = defaultdict(dict)
    for team_id, flavor_id, hour, allocated, used in (
            UsageHour.objects.filter(team_id__in=team_ids, flavor_id__in=flavor_ids, hour__gte=start, hour__lt=end)
            .values_list("team_id", "flavor_id", "hour", "allocated_gpu_hours", "used_gpu_hours")):
        usage[(team_id, flavor_id)][hour] = (allocated, used)

    levels: dict[tuple, list] = defaultdict(list)
    for team_id, flavor_id, since, guaranteed in (
            QuotaLevel.objects.filter(team_id__in=team_ids, flavor_id__in=flavor_ids, since__lt=end)
            .order_by("since", "pk").values_list("team_id", "flavor_id", "since", "guaranteed")):
        levels[(team_id, flavor_id)].append((since, guaranteed))

    held = {(q["team_id"], q["flavor_id"]): (q["guaranteed"], q["burst"])
            for q in Quota.objects.filter(team_id__in=team_ids, flavor_id__in=flavor_ids)
            .values("team_id", "flavor_id", "guaranteed", "burst")}

    cluster_ids = {f.cluster_id for _, f in pairs}
    periods = price_periods(start=start, end=end,
                            flavors=list(GpuFlavor.objects.filter(cluster_id__in=cluster_ids).order_by("pk")))
    by_flavor = defaultdict(list)
    for p in periods:
        by_flavor[p.flavor_id].append(p)

    waits = _waits(team_ids, flavor_ids, keys, start, end, now)

    result = []
    for team, flavor in pairs:
        key = (team.pk, flavor.pk)
        rows = usage.get(key, {})
        allocated = [rows.get(h, (ZERO, ZERO))[0] for h in hours]
        used = [rows.get(h, (ZERO, ZERO))[1] for h in hours]
        steps = levels.get(key, [])
        starts = [since for since, _ in steps]
        guaranteed = [steps[i - 1][1] if (i := bisect_right(starts, h)) else 0 for h in hours]
        prices = [_price_at(by_flavor[flavor.pk], h) for h in hours]
        totals, per_hour = waits.get(key, ({}, {}))
        g_now, b_now = held.get(key, (0, 0))
        result.append(Evidence(
            team=team, flavor=flavor, start=start, end=end, guaranteed_now=g_now, burst_now=b_now, hours=hours,
            guaranteed=guaranteed, allocated=allocated, used=used, prices=prices,
            waited_unit_hours={r: _gh(totals.get(r, ZERO)) for r in REASONS},
            quota_waiting=[per_hour.get(h, ZERO) for h in hours], currency=settings.BILLING_CURRENCY))
    return result


def _price_at(periods, hour: datetime) -> Decimal | None:
    for p in periods:
        if p.start <= hour < p.end:
            return p.price
    return None


Interval = tuple[datetime, datetime, str]


def job_wait_intervals(*, submitted_at: datetime, admitted_at: datetime | None, finished_at: datetime | None,
                       spans: list[tuple[str, datetime, datetime | None]], now: datetime) -> list[Interval]:
    """A job's wait, piece by piece with its reason. The timeline says how long: from submission until admission
    (or, never admitted, until it ended or now). The recorded waits say why, and also cover a wait after an
    eviction; any part of the timeline's wait no recorded wait explains was a wait for quota (a queued job's
    state says it waits for quota)."""
    life_end = finished_at or now
    recorded = sorted((max(s, submitted_at), min(e or life_end, life_end), reason) for reason, s, e in spans)
    recorded = [(s, e, r) for s, e, r in recorded if s < e]
    pieces: list[Interval] = list(recorded)
    cursor, base_end = submitted_at, min(admitted_at or life_end, life_end)
    for s, e, _ in recorded:
        if s > cursor:
            pieces.append((cursor, min(s, base_end), WaitReason.QUOTA))
        cursor = max(cursor, e)
    if cursor < base_end:
        pieces.append((cursor, base_end, WaitReason.QUOTA))
    return [(s, e, r) for s, e, r in pieces if s < e]


def _waits(team_ids, flavor_ids, keys, start: datetime, end: datetime, now: datetime) -> dict:
    """(team, flavor) → (reason → unit-hours waited in [start, end), hour → unit-hours waited for quota)."""
    jobs = list(Job.objects.filter(team_id__in=team_ids, flavor_id__in=flavor_ids, submitted_at__lt=end)
                .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=start))
                .values_list("pk", "team_id", "flavor_id", "workers", "gpus_per_worker", "submitted_at",
                             "admitted_at", "finished_at"))
    spans = defaultdict(list)
    for job_id, reason, s, e in (JobWait.objects.filter(job__team_id__in=team_ids, job__flavor_id__in=flavor_ids,
                                                        started_at__lt=end)
                                 .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
                                 .values_list("job_id", "reason", "started_at", "ended_at")):
        spans[job_id].append((reason, s, e))
    found: dict = {}
    for pk, team_id, flavor_id, workers, per_worker, submitted, admitted, finished in jobs:
        if (team_id, flavor_id) not in keys:
            continue
        totals, per_hour = found.setdefault((team_id, flavor_id), (defaultdict(Decimal), defaultdict(Decimal)))
        units = workers * per_worker
        for s, e, reason in job_wait_intervals(submitted_at=submitted, admitted_at=admitted, finished_at=finished,
                                               spans=spans.get(pk, []), now=min(now, end)):
            s, e = max(s, start), min(e, end)
            if s >= e:
                continue
            totals[reason] += Decimal(int((e - s).total_seconds())) * units / 3600
            if reason == WaitReason.QUOTA:
                hour = floor_hour(s)
                while hour < e:
                    part = min(e, hour + HOUR) - max(s, hour)
                    per_hour[hour] += Decimal(int(part.total_seconds())) * units / 3600
                    hour += HOUR
    return found
