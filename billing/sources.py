"""Where a cluster's usage is read from: its Prometheus, or a source plugged in for clusters without one.

Billing knows one source of its own, a cluster's Prometheus (metrics.PrometheusSource). A layer above may plug in
another for clusters that have no Prometheus (`register`): the demo's wiring plugs in the synthetic usage of a
sandbox cluster (composition.demo.usage). A plugged-in source answers what PrometheusSource answers:
`hour_usage(hour)` for the collector, `activity_now(now)` (live_activity.PodReading's) for the idle rules and
`job_gpus(...)` (gpus.JobGpus) for the usage explorer's GPU level.
"""

from collections.abc import Callable

from django.core.exceptions import ObjectDoesNotExist

from .metrics import MetricsError, MetricsSource, PrometheusSource
from .models import ClusterUsageSource

# cluster → its source, or None when the plug-in does not serve that cluster.
SourceFactory = Callable[[object], MetricsSource | None]
_plugged: list[SourceFactory] = []


def register(factory: SourceFactory) -> None:
    """Plug in a source for clusters without a Prometheus URL (once: registering again changes nothing)."""
    if factory not in _plugged:
        _plugged.append(factory)


def usage_source_of(cluster) -> ClusterUsageSource:
    """The cluster's usage source row (select_related("usage_source") saves its query); a cluster written without
    one, straight to the table, reads as the defaults: no Prometheus, the scrape shape detected."""
    try:
        return cluster.usage_source
    except ObjectDoesNotExist:
        return ClusterUsageSource(cluster=cluster)


def source_for(cluster, *, timeout: float | None = None) -> MetricsSource:
    """A cluster with a Prometheus URL is read from it (each query given `timeout` seconds, else the collector's);
    else the first plugged-in source that serves it."""
    usage_source = usage_source_of(cluster)
    if usage_source.prometheus_url:
        return PrometheusSource(usage_source.prometheus_url, shape=usage_source.scrape_shape, timeout=timeout)
    for factory in _plugged:
        if (source := factory(cluster)) is not None:
            return source
    raise MetricsError(f"cluster {cluster.name} has no Prometheus URL: usage cannot be collected")
