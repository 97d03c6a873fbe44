"""Where a cluster's usage is read from: its Prometheus, or for a sandbox cluster without one, its pods."""

from django.core.exceptions import ObjectDoesNotExist

from .metrics import MetricsError, MetricsSource, PrometheusSource
from .models import ClusterUsageSource
from .sandbox_usage import SandboxSource


def usage_source_of(cluster) -> ClusterUsageSource:
    """The cluster's usage source row (select_related("usage_source") saves its query); a cluster written without
    one, straight to the table, reads as the defaults: no Prometheus, the scrape shape detected."""
    try:
        return cluster.usage_source
    except ObjectDoesNotExist:
        return ClusterUsageSource(cluster=cluster)


def source_for(cluster) -> MetricsSource:
    """A cluster with a Prometheus URL is read from it; a sandbox cluster without one gets synthetic series."""
    usage_source = usage_source_of(cluster)
    if usage_source.prometheus_url:
        return PrometheusSource(usage_source.prometheus_url, shape=usage_source.scrape_shape)
    if cluster.connection == "sandbox":
        return SandboxSource.for_cluster(cluster)
    raise MetricsError(f"cluster {cluster.name} has no Prometheus URL: usage cannot be collected")
