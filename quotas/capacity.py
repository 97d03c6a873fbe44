"""The capacity invariant: for every flavor, Σ guaranteed units of active teams ≤ capacity × the cluster's
overcommit. Every write that can raise Σ guaranteed or lower what is allowed (approval, a direct quota, the
revert of a time-boxed grant, resuming a team, a capacity or overcommit edit) checks it here, with the flavor
rows locked first and in primary-key order, so two such writes queue instead of both passing.

A change that lowers Σ guaranteed (or leaves it) is always allowed, so a flavor over its capacity (a smaller
GPU pool, say) can be brought back down step by step.
"""

from __future__ import annotations

from math import floor

from django.core.exceptions import ValidationError
from django.db.models import Sum

from tenants import checks
from tenants.choices import TeamState
from tenants.models import Cluster, GpuFlavor, Team

from .models import Quota


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


def register() -> None:
    """Hand the checks to the tenancy writes, which run them before a resume or a capacity edit is saved."""
    checks.register_capacity_check("resume", check_resume)
    checks.register_capacity_check("flavor", check_flavor_capacity)
    checks.register_capacity_check("cluster", check_cluster_overcommit)
