"""`/metrics`: the portal's Prometheus metrics, for the platform team's alerting (README, "Metrics").

What each process counted (portal.metrics: requests per view, failed sends to the broker, Celery task outcomes),
plus gauges read from the database and Redis at scrape time, so every web pod reports the same: the reconcile
backlog and rows retrying per cluster, jobs waiting for their objects, how long ago each cluster's watcher last
wrote, and whether the broker and each cluster answer (what `/readyz` reports but no longer fails on).
"""

from __future__ import annotations

import hmac
import time

from django.conf import settings
from django.db.models import Count, F, Q, Sum
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY

from portal import metrics
from tenants.models import Cluster, TeamNamespace

from .views import dependencies


class SystemCollector:
    """Gauges of the whole system, read when scraped."""

    def collect(self):
        yield from self._reconcile()
        yield from self._tasks()
        yield from self._health()

    def _reconcile(self):
        backlog = GaugeMetricFamily("gpu_portal_reconcile_backlog",
                                    "Team namespaces whose latest change is not yet applied, per cluster.",
                                    labels=["cluster"])
        retrying = GaugeMetricFamily("gpu_portal_reconcile_retrying",
                                     "Team namespaces and clusters waiting for a retry after a failed apply.",
                                     labels=["cluster"])
        attempts = GaugeMetricFamily("gpu_portal_reconcile_attempts",
                                     "Failed attempts so far of the rows not yet converged, per cluster.",
                                     labels=["cluster"])
        jobs_due = GaugeMetricFamily("gpu_portal_jobs_due", "Jobs whose objects are to be created or deleted.",
                                     labels=["cluster"])
        lag = GaugeMetricFamily("gpu_portal_watcher_lag_seconds",
                                "Seconds since the cluster's watcher last wrote what its watches brought.",
                                labels=["cluster"])
        clusters = {c.pk: c for c in Cluster.objects.filter(active=True)}
        rows = (TeamNamespace.objects.filter(cluster__in=clusters, deleted_at__isnull=True).values("cluster")
                .annotate(backlog=Count("pk", filter=Q(observed_generation__lt=F("generation"))),
                          retrying=Count("pk", filter=Q(attempts__gt=0, next_attempt_at__isnull=False)),
                          attempts=Sum("attempts", filter=Q(observed_generation__lt=F("generation")))))
        by_cluster = {row["cluster"]: row for row in rows}
        due = metrics.due_counts(list(clusters)).get("jobs", {})
        for pk, cluster in clusters.items():
            row = by_cluster.get(pk, {})
            own = 1 if cluster.attempts and cluster.next_attempt_at else 0
            backlog.add_metric([cluster.name], row.get("backlog", 0) + (cluster.observed_generation <
                                                                        cluster.generation))
            retrying.add_metric([cluster.name], row.get("retrying", 0) + own)
            attempts.add_metric([cluster.name], (row.get("attempts") or 0))
            jobs_due.add_metric([cluster.name], due.get(pk, 0))
        now = time.time()
        for name, flushed in metrics.watcher_last_flush([c.name for c in clusters.values()]).items():
            lag.add_metric([name], max(0.0, now - flushed))
        yield from (backlog, retrying, attempts, jobs_due, lag)

    def _tasks(self):
        outcomes = metrics.task_outcomes()
        if outcomes is None:
            return
        family = CounterMetricFamily("gpu_portal_celery_tasks", "Celery task outcomes, counted by the workers.",
                                     labels=["task", "outcome"])
        for (task, outcome), count in sorted(outcomes.items()):
            family.add_metric([task, outcome], count)
        yield family

    def _health(self):
        up = GaugeMetricFamily("gpu_portal_dependency_up", "1 when the dependency answers (the broker, each cluster).",
                               labels=["dependency"])
        for name, (ok, _detail) in dependencies().items():
            up.add_metric([name], 1 if ok else 0)
        yield up


def _authorised(request) -> bool:
    token = settings.METRICS_TOKEN
    if not token:
        return True
    sent = request.headers.get("Authorization", "")
    return hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())


@never_cache
@require_GET
def metrics_view(request):
    """Prometheus's text format. With METRICS_TOKEN set, only a scrape that sends it as a bearer token."""
    if not _authorised(request):
        return HttpResponse("Send 'Authorization: Bearer <METRICS_TOKEN>'.\n", status=401,
                            content_type="text/plain")
    registry = CollectorRegistry()
    if metrics.multiprocess_dir():
        MultiProcessCollector(registry)
    else:
        for collector in list(REGISTRY._collector_to_names):
            registry.register(collector)
    registry.register(SystemCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
