"""The capacity invariant: for every flavor, Σ guaranteed units of active teams ≤ capacity × the cluster's
overcommit. Every write that can raise Σ guaranteed or lower what is allowed (approval, a direct quota, the
revert of a time-boxed grant, resuming a team, a capacity or overcommit edit) checks it here, with the flavor
rows locked first and in primary-key order, so two such writes queue instead of both passing.

A change that lowers Σ guaranteed (or leaves it) is always allowed, so a flavor over its capacity (a smaller
GPU pool, say) can be brought back down step by step.
"""

from __future__ import annotations

from datetime import datetime
from math import floor

from django.core.exceptions import ValidationError
from django.db.models import Sum

from backends import backend_for
from tenants import checks
from tenants.choices import TeamState
from tenants.models import Cluster, GpuFlavor, Team

from .choices import ReservationState
from .models import Quota, Reservation

# Σ guaranteed over time is a sum of steps: (from, until or None for ever, units, team id).
Step = tuple[datetime, datetime | None, int, int]


def allowed_units(capacity: int, overcommit) -> int:
    return floor(capacity * overcommit)


def lock_flavors(flavor_ids) -> list[GpuFlavor]:
    """Lock flavor rows in primary-key order (only the flavors: their cluster rows stay unlocked, so editing a
    cluster, which locks the cluster and then its flavors, cannot deadlock with an approval)."""
    return list(GpuFlavor.objects.select_for_update(of=("self",)).select_related("cluster")
                .filter(pk__in=list(flavor_ids)).order_by("pk"))


def guaranteed_by_flavor(flavor_ids, *, also_team: Team | None = None) -> dict[int, int]:
    """Σ guaranteed per flavor over active teams (and `also_team`, about to become active)."""
    quotas = Quota.objects.filter(flavor_id__in=list(flavor_ids))
    active = quotas.filter(team__state=TeamState.ACTIVE)
    sums = {row["flavor_id"]: row["g"] or 0 for row in active.values("flavor_id").annotate(g=Sum("guaranteed"))}
    if also_team is not None and also_team.state != TeamState.ACTIVE:
        for quota in quotas.filter(team=also_team):
            sums[quota.flavor_id] = sums.get(quota.flavor_id, 0) + quota.guaranteed
    return sums


def _holders(flavor: GpuFlavor, limit: int = 5) -> str:
    rows = (Quota.objects.filter(flavor=flavor, team__state=TeamState.ACTIVE, guaranteed__gt=0)
            .order_by("-guaranteed", "team__slug").values_list("team__slug", "guaranteed")[:limit])
    return ", ".join(f"{slug} {units}" for slug, units in rows)


def check_resume(*, team: Team) -> None:
    """Resuming a suspended team brings its guarantees back: they must fit beside what was granted meanwhile."""
    flavor_ids = Quota.objects.filter(team=team, guaranteed__gt=0).values_list("flavor_id", flat=True)
    flavors = lock_flavors(flavor_ids)
    sums = guaranteed_by_flavor([f.pk for f in flavors], also_team=team)
    problems = []
    for flavor in flavors:
        allowed = allowed_units(flavor.capacity, flavor.cluster.overcommit)
        if sums.get(flavor.pk, 0) > allowed:
            mine = Quota.objects.get(team=team, flavor=flavor).guaranteed
            problems.append(
                f"{flavor.name} in {flavor.cluster.name}: its {mine} guaranteed units would make "
                f"{sums[flavor.pk]}, more than the {allowed} allowed (capacity {flavor.capacity} × overcommit "
                f"{flavor.cluster.overcommit:g})"
            )
    if problems:
        raise ValidationError(
            f"Resuming {team.slug} would over-commit: " + "; ".join(problems)
            + ". Lower its quota or another team's, or add capacity, first."
        )


def check_flavor_capacity(*, flavor: GpuFlavor, capacity: int, overcommit) -> None:
    """A capacity or overcommit edit may not leave less room than is already guaranteed (unless it adds room)."""
    if flavor.pk is None:
        return
    (locked,) = lock_flavors([flavor.pk])
    guaranteed = guaranteed_by_flavor([flavor.pk]).get(flavor.pk, 0)
    allowed = allowed_units(capacity, overcommit)
    before = allowed_units(locked.capacity, locked.cluster.overcommit)
    if guaranteed > allowed and allowed < before:
        raise ValidationError(
            {"capacity": f"{flavor.name}: capacity {capacity} × overcommit {overcommit:g} allows {allowed} "
                         f"guaranteed units, but teams already hold {guaranteed} ({_holders(locked)}). Lower "
                         f"their quotas first, or keep at least {guaranteed} allowed."}
        )


def check_flavor_queue_limits(*, flavor: GpuFlavor, capacity: int, overcommit) -> None:
    """A new flavor, or one moved to another resource name, must keep the cluster within what its scheduler's team
    queue can list (Kueue: one resource group for every flavor, `Backend.queue_limit_problem`)."""
    others = list(GpuFlavor.objects.filter(cluster=flavor.cluster_id).exclude(pk=flavor.pk))
    problem = backend_for(flavor.cluster).queue_limit_problem([*others, flavor])
    if problem:
        raise ValidationError(problem)


def check_cluster_overcommit(*, cluster: Cluster, overcommit) -> None:
    problems = []
    for flavor in lock_flavors(cluster.flavors.values_list("pk", flat=True)):
        try:
            check_flavor_capacity(flavor=flavor, capacity=flavor.capacity, overcommit=overcommit)
        except ValidationError as exc:
            problems.extend(exc.messages)
    if problems:
        raise ValidationError({"overcommit": problems})


def units_after_revert(*, quota: Quota, guaranteed: int) -> int:
    """How many of the `guaranteed` units a time-boxed grant reverts to fit (the caller holds the flavor lock).

    Giving units back always fits. Taking more back than the time box held only fits beside what was granted
    meanwhile; the rest is not restored (and the caller says so)."""
    if guaranteed <= quota.guaranteed or quota.team.state != TeamState.ACTIVE:
        return guaranteed  # a suspended team's units are checked when it resumes
    flavor = quota.flavor
    others = (Quota.objects.filter(flavor=flavor, team__state=TeamState.ACTIVE).exclude(pk=quota.pk)
              .aggregate(g=Sum("guaranteed"))["g"] or 0)
    room = allowed_units(flavor.capacity, flavor.cluster.overcommit) - others
    return max(quota.guaranteed, min(guaranteed, room))


# --- over time ------------------------------------------------------------------------------------------------
# The invariant holds at every instant, not just now: a time-boxed grant falls back to what it reverts to, a
# booked reservation adds its units over its window, an active one takes them away at its end. Every instant
# where any of these changes is a step boundary; between two boundaries Σ guaranteed is constant, so checking it at
# the window's start and at each boundary inside the window checks every instant. Windows are half-open [start,
# end): a reservation ending at 12:00 and one starting at 12:00 never hold units at the same instant.


def reserved_active(*, team_id: int, flavor_id: int) -> int:
    """Units of active reservations the team's quota of this flavor holds now (on top of what it was granted)."""
    return Reservation.objects.filter(team_id=team_id, flavor_id=flavor_id, state=ReservationState.ACTIVE) \
        .aggregate(u=Sum("units"))["u"] or 0


def quota_steps(*, guaranteed: int, expires_at, revert_guaranteed: int, team_id: int, now) -> list[Step]:
    if expires_at is not None and expires_at > now:
        return [(now, expires_at, guaranteed, team_id), (expires_at, None, revert_guaranteed, team_id)]
    if expires_at is not None:  # due: the worker reverts it any moment now
        return [(now, None, revert_guaranteed, team_id)]
    return [(now, None, guaranteed, team_id)]


def commitments(*, flavor: GpuFlavor, now, exclude_team_quota: int | None = None) -> list[Step]:
    """Every step of the flavor's Σ guaranteed from now on (the caller holds the flavor lock): the active teams'
    quotas (less the quota of `exclude_team_quota`, whose steps the caller replaces), the booked reservations over
    their windows, and the active ones leaving at their end."""
    steps: list[Step] = []
    for q in Quota.objects.filter(flavor=flavor, team__state=TeamState.ACTIVE).exclude(team_id=exclude_team_quota):
        steps += quota_steps(guaranteed=q.guaranteed, expires_at=q.expires_at, revert_guaranteed=q.revert_guaranteed,
                             team_id=q.team_id, now=now)
    reservations = Reservation.objects.filter(flavor=flavor, team__state=TeamState.ACTIVE, ends_at__gt=now,
                                              state__in=[ReservationState.BOOKED, ReservationState.ACTIVE])
    for r in reservations:
        if r.state == ReservationState.ACTIVE:
            if r.team_id != exclude_team_quota:  # the replaced quota's steps say what it holds
                steps.append((r.ends_at, None, -r.units, r.team_id))
        else:
            steps.append((max(r.starts_at, now), r.ends_at, r.units, r.team_id))
    return steps


def level_at(steps: list[Step], moment) -> int:
    return sum(units for start, end, units, _ in steps if start <= moment and (end is None or moment < end))


def peak(steps: list[Step], start, end=None) -> tuple[int, datetime]:
    """The highest Σ guaranteed over [start, end) (end None: for ever), and the first instant it is reached."""
    moments = sorted({start} | {m for s, e, _, _ in steps for m in (s, e)
                                if m is not None and start < m and (end is None or m < end)})
    best = max(moments, key=lambda m: (level_at(steps, m), -m.timestamp()))
    return level_at(steps, best), best


def check_future(*, flavor: GpuFlavor, team: Team, guaranteed: int, expires_at, revert_guaranteed: int, now) -> None:
    """A grant that fits now must fit at every later instant too, beside the reservations booked for then. An
    instant it does not make worse than it already is stays allowed (as now: a change that lowers Σ guaranteed)."""
    others = commitments(flavor=flavor, now=now, exclude_team_quota=team.pk)
    current = Quota.objects.filter(team=team, flavor=flavor).first()
    before = others + (quota_steps(guaranteed=current.guaranteed, expires_at=current.expires_at,
                                   revert_guaranteed=current.revert_guaranteed, team_id=team.pk, now=now)
                       if current else [])
    after = others + quota_steps(guaranteed=guaranteed, expires_at=expires_at, revert_guaranteed=revert_guaranteed,
                                 team_id=team.pk, now=now)
    allowed = allowed_units(flavor.capacity, flavor.cluster.overcommit)
    for moment in sorted({m for s, e, _, _ in after for m in (s, e) if m is not None and m > now}):
        level = level_at(after, moment)
        if level > allowed and level > level_at(before, moment):
            raise ValidationError(
                f"From {moment:%Y-%m-%d %H:%M} UTC the teams would be guaranteed {level} {flavor.name} units, more "
                f"than the {allowed} allowed, beside the reservations booked for then. Grant less, or end it "
                "before then.")


def check_reservation(*, flavor: GpuFlavor, units: int, starts_at, ends_at, now) -> None:
    """Booking `units` over [starts_at, ends_at) must leave Σ guaranteed within capacity at every instant of it."""
    steps = commitments(flavor=flavor, now=now) + [(starts_at, ends_at, units, 0)]
    level, moment = peak(steps, max(starts_at, now), ends_at)
    allowed = allowed_units(flavor.capacity, flavor.cluster.overcommit)
    if level > allowed:
        free = allowed - (level - units)
        raise ValidationError(
            f"At {moment:%Y-%m-%d %H:%M} UTC the teams would be guaranteed {level} {flavor.name} units, more than "
            f"the {allowed} allowed (capacity {flavor.capacity} × overcommit {flavor.cluster.overcommit:g}): at most "
            f"{max(0, free)} can be booked over this whole window.")


def register() -> None:
    """Hand the checks to the tenancy writes, which run them before a resume or a capacity edit is saved."""
    checks.register_capacity_check("resume", check_resume)
    checks.register_capacity_check("flavor", check_flavor_capacity)
    checks.register_capacity_check("flavor", check_flavor_queue_limits)
    checks.register_capacity_check("cluster", check_cluster_overcommit)
