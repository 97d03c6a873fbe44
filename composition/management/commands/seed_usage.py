"""Demo usage: the last 30 days of every sandbox cluster, collected hour by hour through the usage collector.

The source is the sandbox's synthetic one, fed with a deterministic history of runs per team and flavor the team
holds quota for (busier on weekdays, some idle stretches), plus the pods running in the cluster now. Hours already
collected are left alone, so running it again changes nothing.
"""

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from django.utils import timezone

from billing import metrics, services
from billing.choices import HourState
from billing.models import CollectedHour
from composition.demo import usage as sandbox_usage
from quotas.models import Quota
from tenants.choices import Connection
from tenants.models import Cluster

POWER_WATTS = {"H100": 700.0, "A100": 400.0, "L40S": 350.0}


def _max_power(gpu_model: str) -> float:
    return next((watts for name, watts in POWER_WATTS.items() if name in gpu_model), 500.0)


def history(cluster: Cluster, *, start, days: int,
            owned: dict[int, list[str]] | None = None) -> list[sandbox_usage.PodRun]:
    """Runs per (team, flavor) with quota: one to three a day, 2–12 hours long, a quarter to three quarters of the
    team's guaranteed units; weekends are quieter. With `owned` (sandbox_usage.flavor_nodes), a run of a flavor
    sharing its resource and model with another runs on one of its own nodes."""
    runs = []
    quotas = Quota.objects.filter(flavor__cluster=cluster, guaranteed__gt=0).select_related("team", "flavor")
    for quota in quotas.order_by("pk"):
        team, flavor = quota.team, quota.flavor
        for day in range(days):
            midnight = start + timedelta(days=day)
            per_day = 1 + int(3 * sandbox_usage.unit(team.slug, flavor.name, midnight.date(), "runs"))
            if midnight.weekday() >= 5:
                per_day = max(0, per_day - 2)
            for index in range(per_day):
                start_at, minute, size, length = (
                    sandbox_usage.unit(team.slug, flavor.name, midnight.date(), index, what)
                    for what in ("start", "minute", "gpus", "hours"))
                begins = midnight + timedelta(hours=int(20 * start_at), minutes=int(60 * minute))
                runs.append(sandbox_usage.PodRun(
                    namespace=team.namespace, name=f"{team.slug}-{flavor.name}-{midnight:%m%d}-{index}",
                    resource=metrics.ksm_resource(flavor.resource_name),
                    gpus=max(1, round(quota.guaranteed * (0.25 + 0.5 * size))),
                    started_at=begins, finished_at=begins + timedelta(hours=2 + 10 * length),
                    gpu_model=flavor.gpu_model, memory_gib=float(flavor.memory_gb),
                    max_power_watts=_max_power(flavor.gpu_model),
                    node=_pick((owned or {}).get(flavor.pk, []), team.slug, midnight.date(), index)))
    return runs


def _pick(names: list[str], *parts) -> str:
    return names[int(len(names) * sandbox_usage.unit(*parts, "node"))] if names else ""


class Command(BaseCommand):
    help = "Collect synthetic usage for the last days of every sandbox cluster (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=30, help="how many days back (default 30)")

    def handle(self, *args, days, **options):
        if days < 1 or days > 366:
            raise CommandError("--days must be between 1 and 366")
        now = timezone.now()
        last = now.replace(minute=0, second=0, microsecond=0) - metrics.HOUR
        first = last - timedelta(days=days) + metrics.HOUR
        clusters = Cluster.objects.filter(Q(usage_source__isnull=True) | Q(usage_source__prometheus_url=""),
                                          active=True, connection=Connection.SANDBOX)
        for cluster in clusters.order_by("name"):
            try:
                owned = sandbox_usage.flavor_nodes(cluster)
                node_capacity = sandbox_usage.cluster_node_capacity(cluster, owned)
            except metrics.MetricsError as exc:
                owned, node_capacity = {}, {}
                self.stderr.write(f"{cluster.name}: flavors sharing a GPU model are not told apart ({exc})")
            runs = history(cluster, start=first.replace(hour=0), days=days + 1, owned=owned)
            try:
                runs += sandbox_usage.cluster_pod_runs(cluster)
            except metrics.MetricsError as exc:
                self.stderr.write(f"{cluster.name}: only the synthetic history ({exc})")
            source = sandbox_usage.SandboxSource(lambda runs=runs: runs, node_capacity=node_capacity,
                                                 capacity=sandbox_usage.cluster_capacity(cluster))
            done = set(CollectedHour.objects.filter(cluster=cluster, state=HourState.COLLECTED,
                                                    hour__gte=first).values_list("hour", flat=True))
            hours = []
            hour = first
            while hour <= last:
                if hour not in done:
                    hours.append(hour)
                hour += metrics.HOUR
            ledgers = services.usage_collect_hours(cluster=cluster, hours=hours, source=source, now=now)
            collected = sum(ledger.state == HourState.COLLECTED for ledger in ledgers)
            self.stdout.write(f"{cluster.name}: {collected} hours of usage collected")
