"""What if a cluster's Kueue weighed the teams' usage over time differently: the recorded usage of the last weeks
(one row per team × flavor × hour) replayed through Kueue's admission fair sharing (`backends.kueue_fairshare`)
with today's weights and half-life, and with proposed ones, side by side. Nothing is applied.

Each team's LocalQueue is a queue of the replay; what it held in an hour is the hour's allocated unit-hours of
each flavor, counted under the resource name the cluster schedules it as. Usage before the window is not known,
so the replay starts from nothing: after a few half-lives the start no longer shows. Three queries, whatever the
window or the number of teams."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Sum

from backends import kueue_fairshare as afs
from tenants.choices import TeamState
from tenants.models import Cluster, GpuFlavor, TeamNamespace

from .models import UsageHour


@dataclass(frozen=True)
class TeamOutcome:
    slug: str
    name: str
    weight_now: int
    weight: int
    consumed_now: float  # decayed GPU units, all resources together
    consumed: float
    usage_now: float  # what the queue is ordered by: Σ resource weight × consumed ÷ queue weight
    usage: float
    share_now: float
    share: float
    place_now: int  # 1 = served first
    place: int

    @property
    def moved(self) -> int:
        """Places gained (positive) or lost in the queue order."""
        return self.place_now - self.place


@dataclass(frozen=True)
class WhatIf:
    teams: list[TeamOutcome]
    start: datetime
    end: datetime
    recorded_hours: int
    now: afs.Replayed
    proposed: afs.Replayed


def cluster_teams(*, cluster: Cluster) -> list[tuple[str, str, int]]:
    """(slug, name, weight) of every team with a namespace in the cluster, by slug."""
    return list(TeamNamespace.objects.filter(cluster=cluster, deleted_at__isnull=True)
                .exclude(team__state=TeamState.ARCHIVED).order_by("team__slug")
                .values_list("team__slug", "team__name", "team__fair_share_weight"))


def recorded_hours(*, cluster: Cluster, start: datetime, end: datetime) -> dict[str, dict[float, dict[str, float]]]:
    """Per team slug, per hour (epoch seconds), the units held on average per scheduled resource name."""
    resources = {flavor.pk: flavor.scheduled_resource(cluster.mig_strategy)
                 for flavor in GpuFlavor.objects.filter(cluster=cluster)}
    rows = (UsageHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
            .values("team__slug", "flavor_id", "hour").annotate(units=Sum("allocated_gpu_hours")).order_by())
    return afs.by_queue((row["team__slug"], row["hour"].timestamp(), resources.get(row["flavor_id"], ""),
                         float(row["units"])) for row in rows if row["flavor_id"] in resources)


def what_if(*, cluster: Cluster, weights: dict[str, int], settings: afs.Settings, baseline: afs.Settings,
            weeks: int, now: datetime) -> WhatIf:
    """The last `weeks` of the cluster's recorded usage replayed with today's weights and `baseline` (the
    Configuration as it is), and with `weights` (by team slug; a team not named keeps its own) and `settings`."""
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(weeks=weeks)
    teams = cluster_teams(cluster=cluster)
    hours = recorded_hours(cluster=cluster, start=start, end=end)
    hours = {slug: by_hour for slug, by_hour in hours.items() if any(slug == t[0] for t in teams)}
    current = {slug: weight for slug, _, weight in teams}
    proposed = {slug: weights.get(slug, weight) for slug, _, weight in teams}
    window = {"start": start.timestamp(), "end": end.timestamp()}
    replay_now = afs.replay(hours, current, baseline, **window)
    replay = afs.replay(hours, proposed, settings, **window)
    rows = [TeamOutcome(
        slug=slug, name=name, weight_now=current[slug], weight=proposed[slug],
        consumed_now=sum(replay_now.consumed[slug].values()), consumed=sum(replay.consumed[slug].values()),
        usage_now=replay_now.usage[slug], usage=replay.usage[slug],
        share_now=replay_now.share[slug], share=replay.share[slug],
        place_now=replay_now.order.index(slug) + 1, place=replay.order.index(slug) + 1) for slug, name, _ in teams]
    return WhatIf(teams=sorted(rows, key=lambda r: r.place), start=start, end=end,
                  recorded_hours=len({hour for by_hour in hours.values() for hour in by_hour}),
                  now=replay_now, proposed=replay)
