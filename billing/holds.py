"""Which teams' new work is held, and why: a monthly budget in "hold" mode that is spent, or a GPU-hour allowance
used up over its window, less what platform admins' overrides in force add (or lift). Reads only; the writes that
follow (hold rows, the scheduler's admission check or queue state, the e-mail) are `billing.enforce`.

`team_holds` reads a fixed number of queries for any number of teams: the month's statements in one aggregate
(`statements_for`), the allowance windows' hourly rows in one query, the overrides in one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from tenants.models import GpuFlavor, Team

from . import allowances
from .choices import BudgetMode, HoldKind
from .models import Allowance, Budget, BudgetHold, BudgetOverride, UsageHour
from .pricing import ZERO, current_month, money, price_periods
from .statements import statements_for

WHO_LIFTS_BUDGET = ("A team admin can raise the budget or switch it to notify; a platform admin can grant an "
                    "override. It lifts by itself when the month ends.")
WHO_LIFTS_ALLOWANCE = ("A platform admin can raise the allowance or grant an override. It lifts by itself as the "
                       "window rolls past the hours used.")


@dataclass(frozen=True)
class Hold:
    """One reason a team's new work waits. `flavor` is None when it holds every flavor (the money budget)."""

    kind: str
    flavor: str | None
    used: Decimal
    limit: Decimal
    unit: str  # "USD" or "GPU-hours"
    sentence: str
    who_lifts: str

    @property
    def over_by(self) -> Decimal:
        return max(ZERO, self.used - self.limit)


@dataclass
class TeamBudgetState:
    """Where a team stands: its holds now, its allowances' use, and an override lifting everything (if any)."""

    team: Team
    holds: list[Hold] = field(default_factory=list)
    allowances: list[allowances.AllowanceUse] = field(default_factory=list)
    lifted_until: datetime | None = None
    enforced: bool = False  # it has a hold-mode budget this month or an allowance

    @property
    def held(self) -> bool:
        return bool(self.holds)


def enforced(now: datetime | None = None) -> Q:
    """Teams with a hold-mode budget for this month or any allowance: their ClusterQueues list the budget check."""
    return Q(budgets__month=current_month(now), budgets__mode=BudgetMode.HOLD) | Q(allowances__isnull=False)


def enforced_teams():
    return Team.objects.filter(enforced()).distinct()


def team_enforced(*, team: Team) -> bool:
    return enforced_teams().filter(pk=team.pk).exists()


def _overrides(teams: list[Team], now: datetime) -> dict[int, list[BudgetOverride]]:
    found = defaultdict(list)
    for override in BudgetOverride.objects.filter(team__in=teams, expires_at__gt=now):
        found[override.team_id].append(override)
    return found


def _amount(value: Decimal, currency: str) -> str:
    return f"{money(value):,} {currency}"


def team_holds(*, teams, now: datetime | None = None) -> dict[int, TeamBudgetState]:
    """Each team's state now (a queryset or list of teams)."""
    now = now or timezone.now()
    teams = list(teams)
    states = {t.pk: TeamBudgetState(team=t) for t in teams}
    if not teams:
        return states
    overrides = _overrides(teams, now)
    month = current_month(now)
    budgets = {b.team_id: b for b in Budget.objects.filter(team__in=teams, month=month, mode=BudgetMode.HOLD)}
    statements = statements_for(teams=[t for t in teams if t.pk in budgets], month=month, now=now) if budgets else {}
    for team_id, budget in budgets.items():
        state = states[team_id]
        state.enforced = True
        extra = sum((o.extra_amount for o in overrides[team_id] if o.extra_amount is not None), ZERO)
        spent, limit = statements[team_id].total_cost, Decimal(budget.amount) + extra
        if spent >= limit:
            granted = f" (with {_amount(extra, budget.currency)} granted by override)" if extra else ""
            state.holds.append(Hold(
                kind=HoldKind.BUDGET, flavor=None, used=spent, limit=limit, unit=budget.currency,
                sentence=(f"Held by the budget: {state.team.slug} has spent {_amount(spent, budget.currency)} of its "
                          f"{_amount(limit, budget.currency)} hard budget for {month:%B %Y}{granted}, "
                          f"{_amount(spent - limit, budget.currency)} over."),
                who_lifts=WHO_LIFTS_BUDGET))
    _allowance_holds(states, overrides, now)
    for team_id, state in states.items():
        lifts = [o.expires_at for o in overrides[team_id] if o.extra_amount is None and o.extra_gpu_hours is None]
        if lifts:
            state.lifted_until, state.holds = max(lifts), []
    return states


def _allowance_holds(states: dict[int, TeamBudgetState], overrides, now: datetime) -> None:
    rules = list(Allowance.objects.filter(team__in=list(states)).select_related("flavor").order_by("flavor__name"))
    if not rules:
        return
    earliest = min(allowances.window(now, a.window_days)[0] for a in rules)
    flavors = list(GpuFlavor.objects.filter(cluster__in={a.flavor.cluster_id for a in rules}).order_by("pk"))
    periods = price_periods(start=earliest, end=now, flavors=flavors)
    fractions = {f.pk: f.fraction for f in flavors}
    hourly = defaultdict(list)
    wanted = Q()
    for a in rules:
        wanted |= Q(team_id=a.team_id, flavor_id=a.flavor_id)
    for team_id, hour, flavor_id, units in (UsageHour.objects.filter(wanted, hour__gte=earliest.replace(
            minute=0, second=0, microsecond=0), hour__lt=now).values_list("team_id", "hour", "flavor_id",
                                                                      "allocated_gpu_hours")):
        hourly[team_id].append((hour, flavor_id, units))
    for a in rules:
        state = states[a.team_id]
        state.enforced = True
        start, end = allowances.window(now, a.window_days)
        use = allowances.window_use(hourly[a.team_id], start=start, end=end, fractions=fractions,
                                    periods=periods).get(a.flavor_id, allowances.WindowUse(ZERO, ZERO, ZERO))
        extra = sum((o.extra_gpu_hours for o in overrides[a.team_id]
                     if o.extra_gpu_hours is not None and o.flavor_id == a.flavor_id), ZERO)
        standing = allowances.AllowanceUse(allowance=a, start=start, end=end, used=use, extra_gpu_hours=extra)
        state.allowances.append(standing)
        if standing.spent:
            granted = f" (with {extra} granted by override)" if extra else ""
            used, limit = _hours(use.gpu_hours), _hours(standing.limit)
            state.holds.append(Hold(
                kind=HoldKind.ALLOWANCE, flavor=a.flavor.name, used=use.gpu_hours, limit=standing.limit,
                unit="GPU-hours", who_lifts=WHO_LIFTS_ALLOWANCE,
                sentence=(f"Held by the budget's GPU-hour allowance: {state.team.slug} used {used} of its {limit} "
                          f"{a.flavor.name} GPU-hours{granted} in the last {a.window_days} days, "
                          f"{_hours(standing.over_by)} over.")))


def _hours(value: Decimal) -> str:
    """GPU-hours to two places, without trailing zeros (10, 2.5, 0.33)."""
    return f"{value.quantize(Decimal('0.01')).normalize():f}"


@dataclass
class BudgetPanel:
    """What the team's usage page and the API show: the holds and allowances now, the open hold row (since when),
    the overrides in force."""

    state: TeamBudgetState
    hold: BudgetHold | None
    overrides: list[BudgetOverride]


def team_budget_panel(*, team: Team, now: datetime | None = None) -> BudgetPanel:
    now = now or timezone.now()
    return BudgetPanel(state=team_holds(teams=[team], now=now)[team.pk],
                       hold=BudgetHold.objects.filter(team=team, ended_at__isnull=True).first(),
                       overrides=list(BudgetOverride.objects.filter(team=team, expires_at__gt=now)
                                      .select_related("flavor", "granted_by").order_by("expires_at")))
