"""Reads for quotas: what each team holds and asks for, and the facts an approver needs (capacity, guarantees
before and after, headroom, whose borrowing shrinks). What the cluster objects should say is `desired`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from math import floor

from django.db.models import Q, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from backends import backend_for
from portal.reconciled import SyncState
from tenants.choices import TeamState
from tenants.models import Cluster, GpuFlavor, Team, TeamNamespace
from tenants.selectors import is_platform_admin, team_list
from tenants.sharing import quota_resource, volcano_resource

from . import capacity
from .choices import RequestState, ReservationState
from .models import Quota, QuotaRequest, Reservation


def team_quotas(*, team: Team) -> QuerySet[Quota]:
    return team.quotas.select_related("flavor__cluster").order_by("flavor__cluster__name", "flavor__name")


def team_requests(*, team: Team) -> QuerySet[QuotaRequest]:
    return team.quota_requests.select_related("flavor__cluster", "requested_by", "decided_by")


def request_list(*, user, state: str | None = None, team_slug: str | None = None,
                 requested_by=None) -> QuerySet[QuotaRequest]:
    """The requests the user may see, optionally only in one state, of one team (its slug) or by one requester."""
    requests = QuotaRequest.objects.select_related("team", "flavor__cluster", "requested_by", "decided_by")
    if not is_platform_admin(user):
        requests = requests.filter(team__in=team_list(user=user))
    if state:
        requests = requests.filter(state=state)
    if team_slug:
        requests = requests.filter(team__slug=team_slug)
    if requested_by is not None:
        requests = requests.filter(requested_by=requested_by)
    return requests


def recently_decided(*, user, limit: int = 20) -> list[QuotaRequest]:
    return list(request_list(user=user).exclude(state=RequestState.PENDING).order_by("-decided_at")[:limit])


def team_request(*, team: Team, pk: int) -> QuotaRequest | None:
    """One of the team's requests, or None (a renewal link to a request that is not the team's offers nothing)."""
    return team_requests(team=team).filter(pk=pk).first()


def request_get(*, user, pk: int) -> QuotaRequest:
    found = request_list(user=user).filter(pk=pk).first()
    if found is None:
        raise Http404("No such request")
    return found


def requestable_flavors(*, team: Team) -> QuerySet[GpuFlavor]:
    """Flavors of clusters where the team has a live namespace."""
    clusters = TeamNamespace.objects.filter(team=team, deleted_at__isnull=True).values("cluster")
    return GpuFlavor.objects.filter(cluster__in=clusters, cluster__active=True).select_related("cluster")


@dataclass
class FlavorUsage:
    flavor: GpuFlavor
    guaranteed: int
    burst: int
    in_use: int

    @property
    def allowed(self) -> int:
        return floor(self.flavor.capacity * self.flavor.cluster.overcommit)

    @property
    def headroom(self) -> int:
        return self.allowed - self.guaranteed

    @property
    def free_beyond_guarantees(self) -> int:
        return max(0, self.flavor.capacity - self.guaranteed)

    def percent(self, value: int) -> float:
        return round(100 * value / self.flavor.capacity, 1) if self.flavor.capacity else 0.0


def capacity_overview(*, cluster: Cluster | None = None) -> list[FlavorUsage]:
    """Per flavor: capacity, Σ guaranteed, Σ burst, in use now, headroom. Three queries, whatever the size."""
    flavors = GpuFlavor.objects.select_related("cluster").order_by("cluster__name", "name")
    if cluster is not None:
        flavors = flavors.filter(cluster=cluster)
    sums = {
        row["flavor"]: row
        for row in Quota.objects.filter(team__state=TeamState.ACTIVE).values("flavor")
        .annotate(g=Sum("guaranteed"), b=Sum("burst"))
    }
    statuses: dict[int, list[dict]] = defaultdict(list)
    for cluster_id, status in (TeamNamespace.objects.filter(deleted_at__isnull=True).exclude(quota_status={})
                               .values_list("cluster_id", "quota_status")):
        statuses[cluster_id].append(status)
    flavors = list(flavors)
    shared = shared_resource_flavors(flavors)
    held = defaultdict(int)
    for (_, flavor_id), units in held_by_jobs(shared).items():
        held[flavor_id] += units
    return [
        FlavorUsage(flavor=f, guaranteed=(sums.get(f.pk) or {}).get("g") or 0,
                    burst=(sums.get(f.pk) or {}).get("b") or 0,
                    in_use=held[f.pk] if f.pk in shared else
                    sum(in_use(flavor=f, scheduler=f.cluster.scheduler, quota_status=status)
                        for status in statuses[f.cluster_id]))
        for f in flavors
    ]


@dataclass
class CapacityEffect:
    """What changing a flavor's capacity would mean for the guarantees and the borrowing built on it."""

    usage: FlavorUsage
    capacity: int

    @property
    def allowed(self) -> int:
        return floor(self.capacity * self.usage.flavor.cluster.overcommit)

    @property
    def headroom(self) -> int:
        return self.allowed - self.usage.guaranteed

    @property
    def shortfall(self) -> int:
        return max(0, -self.headroom)

    @property
    def borrowable(self) -> int:
        return max(0, self.capacity - self.usage.guaranteed)

    @property
    def changed(self) -> bool:
        return self.capacity != self.usage.flavor.capacity


def capacity_effect(*, flavor: GpuFlavor, capacity: int | None = None) -> CapacityEffect:
    usage = next(u for u in capacity_overview(cluster=flavor.cluster) if u.flavor.pk == flavor.pk)
    return CapacityEffect(usage=usage, capacity=flavor.capacity if capacity is None else capacity)


# Volcano counts GPUs per queue and resource name, not per flavor (its Queue `allocated`, like the ResourceQuota's
# `used`): two flavors of one resource name (a100 and l40s nodes, both nvidia.com/gpu) would each show the sum. Those
# are told apart by the jobs the portal placed on each flavor, which the jobs app (a layer above) registers here:
# a callable from flavor ids to {(team id, flavor id): GPUs its admitted and running jobs hold}.
_jobs_holding: list = []


def register_jobs_holding(source) -> None:
    _jobs_holding[:] = [source]


def shared_resource_flavors(flavors) -> set[int]:
    """The flavors of a cluster whose resource name another flavor of it shares."""
    by_resource = defaultdict(list)
    for f in flavors:
        by_resource[(f.cluster_id, volcano_resource(f, f.cluster.mig_strategy))].append(f.pk)
    return {pk for pks in by_resource.values() if len(pks) > 1 for pk in pks}


def held_by_jobs(flavor_ids: set[int]) -> dict[tuple[int, int], int]:
    return _jobs_holding[0](flavor_ids) if flavor_ids and _jobs_holding else {}


def in_use(*, flavor: GpuFlavor, scheduler: str, quota_status: dict) -> int:
    """Units of a flavor a team uses now, as its cluster reports: Kueue counts per flavor (ClusterQueue
    `flavorsUsage`); otherwise the ResourceQuota's `used` per resource, else Volcano's Queue `allocated`."""
    # The cluster counts the resource its MIG strategy schedules (a slice is nvidia.com/gpu under `single`).
    resource = flavor.scheduled_resource(flavor.cluster.mig_strategy)
    counted = backend_for(scheduler).flavor_in_use(flavor.name, resource, quota_status)
    if counted is not None:
        return counted
    strategy = flavor.cluster.mig_strategy
    for source, name in (("used", quota_resource(flavor, strategy)), ("allocated", volcano_resource(flavor, strategy))):
        if name in (quota_status.get(source) or {}):  # a quota controller that has not counted yet reports no key
            return quota_status[source][name]
    return 0


@dataclass
class HeldQuota:
    """One quota of a team with what its cluster says about it."""

    quota: Quota
    in_use: int
    not_applied: str  # why the cluster does not hold what the database does; empty when it does

    @property
    def guaranteed_pct(self) -> int:
        return round(100 * self.quota.guaranteed / max(self.quota.limit, 1))

    @property
    def use_pct(self) -> int:
        return min(100, round(100 * self.in_use / max(self.quota.limit, 1)))


def _not_applied(namespace: TeamNamespace | None, resource: str, expected: int) -> str:
    if namespace is None:
        return "The team has no namespace in this cluster."
    if namespace.sync_state == SyncState.REJECTED:
        return f"Rejected by the cluster: {namespace.sync_message}"
    if namespace.sync_state == SyncState.RETRYING:
        return f"Not applied yet (retrying): {namespace.sync_message}"
    if namespace.sync_state == SyncState.PENDING:
        return "Being applied to the cluster."
    enforced = (namespace.quota_status.get("hard") or {}).get(resource)
    if enforced is not None and enforced != expected:
        return (f"The cluster's ResourceQuota enforces {enforced} {resource}, not the {expected} the portal holds "
                "(a newer change not counted yet, or an edit made in the cluster).")
    return ""


def team_held_quotas(*, team: Team) -> list[HeldQuota]:
    """The team's quotas with "in use" and "not applied" from what each cluster last reported."""
    quotas = list(team_quotas(team=team))
    namespaces = {ns.cluster_id: ns for ns in TeamNamespace.objects.filter(team=team, deleted_at__isnull=True)}
    expected: dict[tuple[int, str], int] = defaultdict(int)
    def resource(flavor: GpuFlavor) -> str:
        return quota_resource(flavor, flavor.cluster.mig_strategy)

    for quota in quotas:
        expected[(quota.flavor.cluster_id, resource(quota.flavor))] += quota.limit
    shared = shared_resource_flavors(GpuFlavor.objects.filter(cluster__in=namespaces).select_related("cluster"))
    by_jobs = held_by_jobs({q.flavor_id for q in quotas} & shared)
    held = []
    for quota in quotas:
        flavor = quota.flavor
        namespace = namespaces.get(flavor.cluster_id)
        status = namespace.quota_status if namespace else {}
        held.append(HeldQuota(
            quota=quota,
            in_use=by_jobs.get((team.pk, flavor.pk), 0) if flavor.pk in shared else
            in_use(flavor=flavor, scheduler=flavor.cluster.scheduler, quota_status=status),
            not_applied=_not_applied(namespace, resource(flavor), expected[(flavor.cluster_id, resource(flavor))]),
        ))
    return held


@dataclass
class Impact:
    """What approving a request would change for its flavor."""

    flavor: GpuFlavor
    capacity: int
    allowed: int
    overcommit: float
    guaranteed_before: int
    guaranteed_after: int
    current: tuple[int, int]  # the team's guaranteed, burst now
    proposed: tuple[int, int]
    team_share_after: float
    shrinking: list[tuple[str, int, int]]  # (team slug, borrowable before, borrowable after)

    @property
    def headroom_after(self) -> int:
        return self.allowed - self.guaranteed_after

    @property
    def fits(self) -> bool:
        return self.guaranteed_after <= self.allowed or self.guaranteed_after <= self.guaranteed_before

    @property
    def overcommit_after(self) -> float:
        return round(self.guaranteed_after / self.capacity, 2) if self.capacity else 0.0


def impact(*, flavor: GpuFlavor, team: Team, guaranteed: int, burst: int, quotas=None) -> Impact:
    """The approver's facts: capacity, Σ guaranteed before/after, headroom, the team's share, and which other
    teams could borrow less (borrowing comes out of capacity that no guarantee holds)."""
    if quotas is None:
        quotas = list(Quota.objects.filter(flavor=flavor, team__state=TeamState.ACTIVE).select_related("team"))
    mine = next((q for q in quotas if q.team_id == team.pk), None)
    current = (mine.guaranteed, mine.burst) if mine else (0, 0)
    before = sum(q.guaranteed for q in quotas)
    after = before - current[0] + guaranteed
    free_before = max(0, flavor.capacity - before)
    free_after = max(0, flavor.capacity - after)
    shrinking = []
    for q in sorted(quotas, key=lambda q: q.team.slug):
        if q.team_id == team.pk or not q.burst:
            continue
        b_before, b_after = min(q.burst, free_before), min(q.burst, free_after)
        if b_after < b_before:
            shrinking.append((q.team.slug, b_before, b_after))
    return Impact(
        flavor=flavor,
        capacity=flavor.capacity,
        allowed=floor(flavor.capacity * flavor.cluster.overcommit),
        overcommit=float(flavor.cluster.overcommit),
        guaranteed_before=before,
        guaranteed_after=after,
        current=current,
        proposed=(guaranteed, burst),
        team_share_after=round(100 * guaranteed / after, 1) if after else 0.0,
        shrinking=shrinking,
    )


def pending_request_for(*, team: Team, flavor: GpuFlavor) -> QuotaRequest | None:
    return QuotaRequest.objects.filter(team=team, flavor=flavor, state=RequestState.PENDING).order_by("pk").first()


def pending_request_count() -> int:
    return QuotaRequest.objects.filter(state=RequestState.PENDING).count()


def pending_with_impact(*, user) -> list[tuple[QuotaRequest, Impact]]:
    """The approvals queue: every pending request with its impact, in a fixed number of queries."""
    pending = list(request_list(user=user, state=RequestState.PENDING).order_by("requested_at", "pk"))
    flavor_ids = {r.flavor_id for r in pending}
    quotas_by_flavor: dict[int, list[Quota]] = defaultdict(list)
    for q in Quota.objects.filter(flavor_id__in=flavor_ids, team__state=TeamState.ACTIVE).select_related("team"):
        quotas_by_flavor[q.flavor_id].append(q)
    return [
        (r, impact(flavor=r.flavor, team=r.team, guaranteed=r.guaranteed, burst=r.burst,
                   quotas=quotas_by_flavor[r.flavor_id]))
        for r in pending
    ]


def expiring_quotas(*, before) -> QuerySet[Quota]:
    return Quota.objects.filter(expires_at__isnull=False, expires_at__lte=before).select_related(
        "team", "flavor__cluster"
    )


def expiry_notices_due(*, now, notice) -> QuerySet[Quota]:
    return Quota.objects.filter(
        Q(expires_at__gt=now, expires_at__lte=now + notice, expiry_notice_sent_at__isnull=True)
    ).select_related("team", "flavor__cluster")


def reservation_end_notices_due(*, now, notice) -> QuerySet[Reservation]:
    return Reservation.objects.filter(state=ReservationState.ACTIVE, ends_at__gt=now, ends_at__lte=now + notice,
                                      end_notice_sent_at__isnull=True).select_related("team", "flavor")


# --- reservations and the capacity calendar ------------------------------------------------------------------


def reservation_list(*, user, state: str | None = None, team_slug: str | None = None) -> QuerySet[Reservation]:
    """The reservations the user may see (platform admins: all; others: their teams')."""
    found = Reservation.objects.select_related("team", "flavor__cluster", "requested_by", "decided_by")
    if not is_platform_admin(user):
        found = found.filter(team__in=team_list(user=user))
    if state:
        found = found.filter(state=state)
    if team_slug:
        found = found.filter(team__slug=team_slug)
    return found


def reservation_get(*, user, pk: int) -> Reservation:
    found = reservation_list(user=user).filter(pk=pk).first()
    if found is None:
        raise Http404("No such reservation")
    return found


CALENDAR_DAYS = 56
OTHERS = "other teams"


@dataclass
class CalendarDay:
    day: date
    by_team: dict[str, int]  # team slug (or OTHERS) → its highest guaranteed units that day
    total: int  # the highest Σ guaranteed at any instant of the day
    free: int  # allowed − total
    cells: list[int] = field(default_factory=list)  # by_team in the order of Calendar.teams


@dataclass
class Calendar:
    flavor: GpuFlavor
    allowed: int
    teams: list[str]
    days: list[CalendarDay]


def capacity_calendar(*, user, flavor: GpuFlavor, now=None, days: int = CALENDAR_DAYS) -> Calendar:
    """Guaranteed units of the flavor day by day from today, stacked by team (grants, time-boxed grants and booked
    reservations) against what capacity allows. Platform admins see every team; others their own teams, the rest
    as one "other teams" figure (the free capacity says as much). Three queries, whatever the span."""
    now = now or timezone.now()
    steps = capacity.commitments(flavor=flavor, now=now)
    slugs = dict(Team.objects.filter(pk__in={s[3] for s in steps}).values_list("pk", "slug"))
    visible = None if is_platform_admin(user) else set(team_list(user=user).values_list("pk", flat=True))

    def label(team_id: int) -> str:
        return slugs[team_id] if visible is None or team_id in visible else OTHERS

    by_label: dict[str, list] = defaultdict(list)
    for step in steps:
        by_label[label(step[3])].append(step)
    first = datetime.combine(now.date(), time.min, tzinfo=UTC)
    allowed = capacity.allowed_units(flavor.capacity, flavor.cluster.overcommit)
    result = []
    for n in range(days):
        start, end = max(now, first + timedelta(days=n)), first + timedelta(days=n + 1)
        moments = sorted({start} | {m for s, e, _, _ in steps for m in (s, e) if m is not None and start < m < end})
        total = max(capacity.level_at(steps, m) for m in moments)
        teams = {name: max(capacity.level_at(own, m) for m in moments) for name, own in by_label.items()}
        result.append(CalendarDay(day=(first + timedelta(days=n)).date(),
                                  by_team={k: v for k, v in teams.items() if v}, total=total, free=allowed - total))
    names = sorted({name for d in result for name in d.by_team}, key=lambda s: (s == OTHERS, s))
    for d in result:
        d.cells = [d.by_team.get(name, 0) for name in names]
    return Calendar(flavor=flavor, allowed=allowed, teams=names, days=result)
