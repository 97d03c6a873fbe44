"""The portal's own Prometheus metrics (prometheus-client): what each process counts as it works.

Per view, request latency and outcomes (RequestMetricsMiddleware); sends to the broker that failed
(portal.enqueue); Celery task outcomes, counted in Redis by the worker processes so that any web pod's /metrics
reports them (task_outcome, read back by task_outcomes). Gauges that describe the system rather than this process
(reconcile backlog, cluster and broker health, watcher lag) are computed when /metrics is scraped, from the database
and Redis (composition/metrics.py).

Under gunicorn several processes serve /metrics: with PROMETHEUS_MULTIPROC_DIR set (gunicorn.conf.py sets it) each
writes its counters to files there and a scrape adds them up.
"""

from __future__ import annotations

import logging
import os
import time

from django.conf import settings
from prometheus_client import Counter, Histogram

log = logging.getLogger(__name__)

REQUEST_SECONDS = Histogram(
    "gpu_portal_http_request_duration_seconds", "Time to answer a request, by view (URL name) and method.",
    ["view", "method"], buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
REQUESTS = Counter("gpu_portal_http_requests_total", "Requests answered, by view, method and status class.",
                   ["view", "method", "status"])
ENQUEUE_FAILURES = Counter("gpu_portal_enqueue_failures_total",
                           "Tasks that could not be sent to the broker after a write (the due sweeps send them).",
                           ["task"])

TASK_OUTCOMES_KEY = "gpu-portal:metrics:task-outcomes"

# Counts of rows due for work per cluster, registered by the apps that own them (e.g. jobs), so the system gauges
# read them without importing those apps: name -> fn(cluster ids) -> {cluster id: count}.
_due_counters: dict = {}


def register_due_counter(name: str, count) -> None:
    _due_counters[name] = count


def due_counts(cluster_ids) -> dict[str, dict[int, int]]:
    return {name: count(cluster_ids) for name, count in _due_counters.items()}


class RequestMetricsMiddleware:
    """Times every request and counts it by the view it resolved to (its URL name: bounded, unlike paths)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        status = 500
        try:
            response = self.get_response(request)
            status = response.status_code
            return response
        finally:
            match = getattr(request, "resolver_match", None)
            view = (match.view_name or match._func_path) if match else "unresolved"
            method = request.method if request.method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD") else "other"
            REQUEST_SECONDS.labels(view, method).observe(time.perf_counter() - started)
            REQUESTS.labels(view, method, f"{status // 100}xx").inc()


def _redis():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)


_local_outcomes: dict[tuple[str, str], int] = {}


def task_outcome(task: str, outcome: str) -> None:
    """Count one task's outcome (succeeded, failed, retried) where every pod can read it; never raises."""
    if not settings.REDIS_URL:
        _local_outcomes[(task, outcome)] = _local_outcomes.get((task, outcome), 0) + 1
        return
    try:
        _redis().hincrby(TASK_OUTCOMES_KEY, f"{task}|{outcome}", 1)
    except Exception as exc:  # noqa: BLE001 - metrics must never fail a task
        log.debug("task outcome not counted: %s", exc)


def task_outcomes() -> dict[tuple[str, str], int] | None:
    """Every task outcome counted so far; None when Redis does not answer."""
    if not settings.REDIS_URL:
        return dict(_local_outcomes)
    try:
        raw = _redis().hgetall(TASK_OUTCOMES_KEY)
    except Exception:  # noqa: BLE001
        return None
    return {tuple(key.decode().split("|", 1)): int(value) for key, value in raw.items()}


WATCH_FLUSH_KEY = "gpu-portal:metrics:watch-flushed:{cluster}"


def watcher_flushed(cluster: str) -> None:
    """The watcher of `cluster` wrote what its watches brought (the mark watcher lag is measured from)."""
    if not settings.REDIS_URL:
        _watch_flushes[cluster] = time.time()
        return
    try:
        _redis().set(WATCH_FLUSH_KEY.format(cluster=cluster), f"{time.time():.3f}", ex=3600)
    except Exception:  # noqa: BLE001 - the lease has already stopped this watcher if Redis is away
        pass


_watch_flushes: dict[str, float] = {}


def watcher_last_flush(clusters: list[str]) -> dict[str, float] | None:
    """When each cluster's watcher last wrote (those that ever did); None when Redis does not answer."""
    if not settings.REDIS_URL:
        return {name: _watch_flushes[name] for name in clusters if name in _watch_flushes}
    try:
        values = _redis().mget([WATCH_FLUSH_KEY.format(cluster=name) for name in clusters]) if clusters else []
    except Exception:  # noqa: BLE001
        return None
    return {name: float(value) for name, value in zip(clusters, values, strict=True) if value}


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None
