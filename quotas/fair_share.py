"""Each team's fair share beside its weight, as its cluster's scheduler reckons it.

Kueue (v0.19.2 pkg/cache/scheduler/fair_sharing.go, dominantResourceShare): a ClusterQueue's share is, over the
resources it borrows, the largest of (usage above its nominal quota) × 1000 / (what its cohort could lend of that
resource), divided by its weight, rounded up; 0 while within its guarantee. The cohort's lendable amount is the
nominal quota of its queues (the portal sets no lending limits).

Volcano (v1.15.1 pkg/scheduler/plugins/proportion/proportion.go, OnSessionOpen): the cluster is dealt out among
queues in proportion to their weights, each capped at its capability and request and raised to its guarantee,
again and again until nothing is left or every queue is met; a queue's share is allocated ÷ deserved. The portal
shows the deal when every team asks for all it may (guaranteed + burst): the fair split when all are busy.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

from tenants.choices import Scheduler, TeamState
from tenants.models import Cluster, TeamNamespace

from .desired import parent_name
from .models import Quota
from .selectors import in_use


@dataclass
class FairShare:
    team: object
    cohort: str
    weight: int
    guaranteed: int
    limit: int
    in_use: int
    share: int | None = None  # Kueue's weighted share (‰ of the cohort borrowed ÷ weight)
    deserved: Fraction | None = None  # Volcano: the team's deal when every team is busy

    @property
    def borrowed(self) -> int:
        return max(0, self.in_use - self.guaranteed)


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
    """One row per team holding GPU quota in the cluster, grouped by cohort (a few queries, whatever the size)."""
    namespaces = {ns.team_id: ns for ns in TeamNamespace.objects.filter(cluster=cluster, deleted_at__isnull=True)
                  .exclude(team__state=TeamState.ARCHIVED).select_related("team__parent")}
    rows: dict[int, FairShare] = {}
    resources: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for quota in Quota.objects.filter(flavor__cluster=cluster, team_id__in=namespaces).select_related(
            "flavor__cluster").order_by("team__slug", "flavor__name"):
        team = namespaces[quota.team_id].team
        used = in_use(flavor=quota.flavor, scheduler=cluster.scheduler,
                      quota_status=namespaces[quota.team_id].quota_status)
        row = rows.setdefault(team.pk, FairShare(team=team, cohort=parent_name(team, cluster),
                                                 weight=team.fair_share_weight, guaranteed=0, limit=0, in_use=0))
        row.guaranteed += quota.guaranteed
        row.limit += quota.guaranteed + quota.burst
        row.in_use += used
        per = resources[team.pk][quota.flavor.scheduled_resource(cluster.mig_strategy)]
        per[0] += max(0, used - quota.guaranteed)
        per[1] += quota.guaranteed
    total = sum(f.capacity for f in cluster.flavors.all()) if cluster.scheduler != Scheduler.KUEUE else 0
    by_cohort: dict[str, list[FairShare]] = defaultdict(list)
    for row in rows.values():
        by_cohort[row.cohort].append(row)
    for cohort, members in by_cohort.items():
        if cluster.scheduler == Scheduler.KUEUE:
            lendable: dict[str, int] = defaultdict(int)
            for member in members:
                for resource, (_, nominal) in resources[member.team.pk].items():
                    lendable[resource] += nominal
            for member in members:
                borrowed = {r: b for r, (b, _) in resources[member.team.pk].items()}
                member.share = kueue_share(borrowed=borrowed, lendable=lendable, weight=member.weight) \
                    if cohort else None
        else:
            deal = proportion_deserved(total=total, queues={
                m.team.slug: (m.weight, m.guaranteed, m.limit) for m in members})
            for member in members:
                member.deserved = deal[member.team.slug]
    return sorted(rows.values(), key=lambda r: (r.cohort, r.team.slug))
