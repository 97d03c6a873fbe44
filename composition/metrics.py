"""`/metrics`: the portal's Prometheus metrics, for the platform team's alerting (docs/operations.md, "Monitoring").

What each process counted (portal.metrics: requests per view, failed sends to the broker, Celery task outcomes),
plus gauges read from the database and Redis at scrape time, so every web pod reports the same: the reconcile
backlog and rows retrying per cluster, jobs waiting for their objects, how long ago each cluster's watcher last
wrote, and whether the broker and each cluster answer (what `/readyz` reports but no longer fails on).
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY

from portal import metrics

from .selectors import dependencies, reconcile_backlog


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
        for row in reconcile_backlog():
            name = [row.cluster.name]
            backlog.add_metric(name, row.backlog)
            retrying.add_metric(name, row.retrying)
            attempts.add_metric(name, row.attempts)
            jobs_due.add_metric(name, row.jobs_due)
            if row.watcher_lag is not None:
                lag.add_metric(name, row.watcher_lag)
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
