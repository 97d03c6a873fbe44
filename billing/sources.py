"""Where a cluster's usage is read from: its Prometheus, or for a sandbox cluster without one, its pods."""

from .metrics import MetricsError, MetricsSource, PrometheusSource
from .sandbox_usage import SandboxSource


def source_for(cluster) -> MetricsSource:
    """A cluster with a Prometheus URL is read from it; a sandbox cluster without one gets synthetic series."""
    if cluster.prometheus_url:
        return PrometheusSource(cluster.prometheus_url, shape=cluster.scrape_shape)
    if cluster.connection == "sandbox":
        return SandboxSource.for_cluster(cluster)
    raise MetricsError(f"cluster {cluster.name} has no Prometheus URL: usage cannot be collected")
