"""Each team's fair share beside its weight, as its cluster's scheduler reckons it.

Kueue (v0.19.2 pkg/cache/scheduler/fair_sharing.go, dominantResourceShare and calculateLendable): a ClusterQueue's
share is, over the resources it borrows, the largest of (usage above its nominal quota, summed over the flavors it
borrows on) × 1000 / (what the whole cohort tree could lend of that resource), divided by its weight, rounded up;
0 while within its guarantee. What can be lent is, for every flavor the root Cohort holds, what the node's parent
could ever get of it (resource_node.go, potentialAvailable), summed per resource: with no lending limits (the portal
sets none) and no quota or borrowing limit on Cohorts, the root's subtree quota, i.e. the nominal quota of every
ClusterQueue in the tree (a ClusterQueue's own borrowingLimit does not enter: the walk starts at its parent).
A department's Cohort has a share of its own by the same rule, with its usage and quota the sums over its
ClusterQueues (resource_node.go, accumulateFromChild: a child lends up all its quota and stores all its usage in
its parent while no lendingLimit keeps some local), and the department's weight. The scheduler's tournament
compares, at each Cohort, the shares of its children: at the root a department is ranked by its Cohort's share, not
by its teams' (pkg/scheduler/fair_sharing_iterator.go, runTournament and computeDRS). The root has no share.

Volcano (v1.15.1 pkg/scheduler/plugins/proportion/proportion.go, OnSessionOpen): the cluster is dealt out among
queues in proportion to their weights, each capped at its capability and request and raised to its guarantee,
again and again until nothing is left or every queue is met; a queue's share is allocated ÷ deserved. The portal
shows the deal when every team asks for all it may (guaranteed + burst): the fair split when all are busy.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from backends import backend_for, kueue_fairshare
from tenants.choices import TeamState
from tenants.models import Cluster, TeamNamespace

from .desired import parent_name
from .models import Quota
from .selectors import held_by_jobs, in_use, shared_resource_flavors


@dataclass
class FairShare:
    team: object
    cohort: str
    weight: int
    guaranteed: int
    limit: int
    in_use: int
    share: int | None = None  # Kueue's weighted share (‰ of the cohort tree borrowed ÷ weight)
    deserved: Fraction | None = None  # Volcano: the team's deal when every team is busy
    department: bool = False  # Kueue: the row of a department's Cohort, its teams summed, with its own weight
    path: tuple[str, ...] = field(default=(), repr=False)  # cohorts from the root down, then the team: page order
    # Per flavor: (guaranteed, in use), so the page shows units of one kind together, never a100s plus MIG slices.
    flavors: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    # Kueue's admission fair sharing: the LocalQueue's decayed usage as its status last said ({"consumed":
    # {resource: units}, "updated": when}), None when the scheduler reported none.
    decayed: dict | None = None

    @property
    def decayed_units(self) -> float | None:
        return None if self.decayed is None else sum((self.decayed.get("consumed") or {}).values())

    @property
    def borrowed_by_flavor(self) -> dict[str, int]:
        return {name: max(0, used - guaranteed) for name, (guaranteed, used) in self.flavors.items()}

    @property
    def borrowed(self) -> int:
        """What is held above the guarantee, flavor by flavor (one flavor's spare guarantee never offsets
        another's borrowing); the whole amount when no flavors are known."""
        if self.flavors:
            return sum(self.borrowed_by_flavor.values())
        return max(0, self.in_use - self.guaranteed)


FlavorResource = tuple[str, str]  # (flavor, resource): what Kueue keeps quota and usage by


def borrowed_by_resource(*, usage: dict[FlavorResource, int], nominal: dict[FlavorResource, int]) -> dict[str, int]:
    """Per resource, the usage above nominal quota summed over the flavors where it is above."""
    borrowed: dict[str, int] = defaultdict(int)
    for (flavor, resource), quota in nominal.items():
        borrowed[resource] += max(0, usage.get((flavor, resource), 0) - quota)
    return dict(borrowed)


def summed(amounts: Iterable[dict[FlavorResource, int]]) -> dict[FlavorResource, int]:
    total: dict[FlavorResource, int] = defaultdict(int)
    for amount in amounts:
        for fr, value in amount.items():
            total[fr] += value
    return dict(total)


def lendable_by_resource(root_nominal: dict[FlavorResource, int]) -> dict[str, int]:
    """What a tree could lend, per resource: its root's quota of every flavor (no lending or borrowing limits)."""
    lendable: dict[str, int] = defaultdict(int)
    for (_, resource), quota in root_nominal.items():
        lendable[resource] += quota
    return dict(lendable)


def node_share(*, usage: dict[FlavorResource, int], nominal: dict[FlavorResource, int],
               root_nominal: dict[FlavorResource, int], weight: int) -> int:
    """The weighted share of a ClusterQueue or Cohort that has a parent: its borrowing against its tree's lendable."""
    return kueue_share(borrowed=borrowed_by_resource(usage=usage, nominal=nominal),
                       lendable=lendable_by_resource(root_nominal), weight=weight)


def cohort_path(cohort: str, parents: dict[str, str]) -> tuple[str, ...]:
    """The cohorts from the root down to `cohort` (empty for none); a cycle is cut where it closes."""
    path: list[str] = []
    while cohort and cohort not in path:
        path.insert(0, cohort)
        cohort = parents.get(cohort, "")
    return tuple(path)


def kueue_share(*, borrowed: dict[str, int], lendable: dict[str, int], weight: int) -> int:
    ratios = [b * 1000 / lendable[r] for r, b in borrowed.items() if b > 0 and lendable.get(r, 0) > 0]
    if not ratios:
        return 0
    if weight == 0:
        return 2**63 - 1
    return math.ceil(max(ratios) / weight)


def proportion_deserved(*, total: int, queues: dict[str, tuple[int, int, int]]) -> dict[str, Fraction]:
    """queues: name -> (weight, guarantee, request = capability). One resource, as proportion does per dimension."""
    deserved = {name: Fraction(0) for name in queues}
    remaining, met = Fraction(max(total - sum(g for _, g, _ in queues.values()), 0)), set()
    for name, (_, guarantee, _) in queues.items():
        deserved[name] = Fraction(guarantee)
    while remaining > 0 and len(met) < len(queues):
        open_queues = [name for name in queues if name not in met]
        total_weight = sum(queues[name][0] for name in open_queues)
        handed = Fraction(0)
        for name in open_queues:
            weight, guarantee, request = queues[name]
            before = deserved[name]
            deserved[name] = max(min(before + remaining * weight / total_weight, request), Fraction(guarantee))
            handed += deserved[name] - before
            if deserved[name] >= request:
                met.add(name)
        if handed == 0:
            break
        remaining -= handed
    return deserved


def fair_shares(*, cluster: Cluster) -> list[FairShare]:
    """One row per team holding GPU quota in the cluster, grouped by cohort, and under Kueue one per department
    Cohort above its teams (a few queries, whatever the size)."""
    rows, usage, nominal = _team_rows(cluster)
    if backend_for(cluster).cohort_tree:
        return _kueue_shares(cluster, rows, usage, nominal)
    total = sum(f.capacity for f in cluster.flavors.all())
    by_cohort: dict[str, list[FairShare]] = defaultdict(list)
    for row in rows:
        by_cohort[row.cohort].append(row)
    for members in by_cohort.values():
        deal = proportion_deserved(total=total, queues={
            m.team.slug: (m.weight, m.guaranteed, m.limit) for m in members})
        for member in members:
            member.deserved = deal[member.team.slug]
    return sorted(rows, key=lambda r: (r.cohort, r.team.slug))


def decayed_usage_state(rows: list[FairShare]) -> str:
    """Whether the cluster's scheduler weighs usage over time (`kueue_fairshare.cluster_state`)."""
    return kueue_fairshare.cluster_state((row.decayed, row.in_use) for row in rows if not row.department)


def _team_rows(cluster: Cluster) -> tuple[list[FairShare], dict, dict]:
    """Each team's row, with its usage and its nominal quota per (flavor, resource), by team id."""
    namespaces = {ns.team_id: ns for ns in TeamNamespace.objects.filter(cluster=cluster, deleted_at__isnull=True)
                  .exclude(team__state=TeamState.ARCHIVED).select_related("team__parent")}
    rows: dict[int, FairShare] = {}
    usage: dict[int, dict[FlavorResource, int]] = defaultdict(dict)
    nominal: dict[int, dict[FlavorResource, int]] = defaultdict(dict)
    shared = shared_resource_flavors(cluster.flavors.select_related("cluster"))
    by_jobs = held_by_jobs(shared)
    for quota in Quota.objects.filter(flavor__cluster=cluster, team_id__in=namespaces).select_related(
            "flavor__cluster").order_by("team__slug", "flavor__name"):
        team = namespaces[quota.team_id].team
        used = by_jobs.get((team.pk, quota.flavor_id), 0) if quota.flavor_id in shared else \
            in_use(flavor=quota.flavor, scheduler=cluster.scheduler,
                   quota_status=namespaces[quota.team_id].quota_status)
        row = rows.setdefault(team.pk, FairShare(team=team, cohort=parent_name(team, cluster),
                                                 weight=team.fair_share_weight, guaranteed=0, limit=0, in_use=0,
                                                 decayed=namespaces[quota.team_id].quota_status.get("decayed")))
        row.guaranteed += quota.guaranteed
        row.limit += quota.guaranteed + quota.burst
        row.in_use += used
        row.flavors[quota.flavor.name] = (quota.guaranteed, used)
        fr = (quota.flavor.name, quota.flavor.scheduled_resource(cluster.mig_strategy))
        usage[team.pk][fr] = used
        nominal[team.pk][fr] = quota.guaranteed
    return list(rows.values()), usage, nominal


def _kueue_shares(cluster: Cluster, rows: list[FairShare], usage: dict, nominal: dict) -> list[FairShare]:
    """The shares down the tree desired.py builds: team ClusterQueues in their department's Cohort, department
    Cohorts under the cluster's cohort (an archived department's Cohort is no longer desired, so the name its
    teams still give is a root of its own)."""
    departments = {row.cohort: row.team.parent for row in rows if row.team.parent_id}
    parents = {name: "" if department.state == TeamState.ARCHIVED else cluster.cohort
               for name, department in departments.items()}
    under: dict[str, list[FairShare]] = defaultdict(list)
    for row in rows:
        above = cohort_path(row.cohort, parents)
        row.path = (*(above or ("",)), row.team.slug)  # teams in no cohort first
        for cohort in above:
            under[cohort].append(row)
    subtree_usage = {cohort: summed(usage[r.team.pk] for r in members) for cohort, members in under.items()}
    subtree_nominal = {cohort: summed(nominal[r.team.pk] for r in members) for cohort, members in under.items()}
    for row in rows:
        row.share = node_share(usage=usage[row.team.pk], nominal=nominal[row.team.pk],
                               root_nominal=subtree_nominal[row.path[0]], weight=row.weight) if row.cohort else None
    cohort_rows = []
    for name, department in departments.items():
        members, path = under[name], cohort_path(name, parents)
        by_flavor: dict[str, tuple[int, int]] = {}
        for member in members:  # the department's units per flavor: never a100s plus MIG slices in one figure
            for flavor, (guaranteed, used) in member.flavors.items():
                held = by_flavor.get(flavor, (0, 0))
                by_flavor[flavor] = (held[0] + guaranteed, held[1] + used)
        cohort_rows.append(FairShare(
            team=department, cohort=parents[name], weight=department.fair_share_weight, department=True, path=path,
            guaranteed=sum(m.guaranteed for m in members), limit=sum(m.limit for m in members),
            in_use=sum(m.in_use for m in members), flavors=dict(sorted(by_flavor.items())),
            # a department's Cohort with no parent is a root: in no tournament, so without a share
            share=node_share(usage=subtree_usage[name], nominal=subtree_nominal[name],
                             root_nominal=subtree_nominal[path[0]], weight=department.fair_share_weight)
            if len(path) > 1 else None))
    return sorted(rows + cohort_rows, key=lambda r: (r.path, not r.department))
