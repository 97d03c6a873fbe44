"""What each GPU pod of a cluster is doing now (the last few minutes), for rules that act on idle GPUs while they
run (the workspaces' idle rule): from the cluster's Prometheus (dcgm-exporter's series by pod), or from the source
plugged in for a cluster without one (sources.register), which answers `activity_now(now)` itself."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from portal import kube

from . import activity
from .metrics import MetricsError, PrometheusSource
from .sources import source_for

log = logging.getLogger(__name__)

WINDOW = "5m"  # what "now" means: the mean over the last five minutes of samples


@dataclass(frozen=True)
class PodReading:
    namespace: str
    pod: str
    job: str  # the portal's job label of the pod ('' where the source does not know it)
    signal: str  # the dcgm-exporter field read
    utilisation: float  # 0..1
    memory_gib: float = 0.0  # per GPU


def _by_pod(series: list[dict]) -> dict[tuple[str, str], float]:
    found = {}
    for item in series:
        labels = item["metric"]
        namespace = labels.get("namespace") or labels.get("exported_namespace", "")
        pod = labels.get("pod") or labels.get("exported_pod", "")
        if namespace and pod:
            found[(namespace, pod)] = float(item["value"][1])
    return found


def prometheus_readings(source: PrometheusSource, now: datetime) -> list[PodReading]:
    """The best activity field the exporters report, per pod, averaged over WINDOW (GPU_UTIL is a percentage)."""
    for signal in activity.SIGNALS:
        values = _by_pod(source.query(f"avg by (namespace, pod, exported_namespace, exported_pod) "
                                      f"(avg_over_time({signal}[{WINDOW}]))", now))
        if values:
            break
    else:
        return []
    memory = _by_pod(source.query(f"avg by (namespace, pod, exported_namespace, exported_pod) "
                                  f"(avg_over_time(DCGM_FI_DEV_FB_USED[{WINDOW}]))", now))
    scale = 100.0 if signal in activity.PERCENT else 1.0
    return [PodReading(namespace=namespace, pod=pod, job="", signal=signal, utilisation=value / scale,
                       memory_gib=memory.get((namespace, pod), 0.0) / 1024)
            for (namespace, pod), value in sorted(values.items())]


def job_reading(readings: list[PodReading], *, namespace: str, job_id: int, object_name: str) -> PodReading | None:
    """A job's pods' reading: by the job label where the source knows it, else by the job's pod-name prefix; the
    busiest of its pods (it is busy if any of them works)."""
    prefix = f"{object_name}-"
    found = [r for r in readings if r.namespace == namespace and (r.job == str(job_id) or
                                                                  (not r.job and r.pod.startswith(prefix)))]
    return max(found, key=lambda r: r.utilisation) if found else None


def activity_now(source, now: datetime) -> list[PodReading]:
    if isinstance(source, PrometheusSource):
        return prometheus_readings(source, now)
    if callable(reading := getattr(source, "activity_now", None)):
        return reading(now)
    raise MetricsError("this usage source cannot say what GPUs are doing now")


def with_readings(items: Iterable, *, report: dict, now: datetime) -> Iterator[tuple[object, list[PodReading]]]:
    """Each running item (a job, a workspace: anything with a `cluster`) beside what its cluster's GPU pods are
    doing now, read once per cluster. A cluster whose activity cannot be read goes into `report["failed"]` and
    its items are left out: nothing is judged idle on no evidence."""
    by_cluster: dict[int, list] = defaultdict(list)
    for item in items:
        by_cluster[item.cluster_id].append(item)
    for members in by_cluster.values():
        cluster = members[0].cluster
        try:
            readings = activity_now(source_for(cluster), now)
        except (MetricsError, kube.KubeError) as exc:
            report["failed"][cluster.name] = str(exc)
            log.warning("GPU activity of cluster %s could not be read: %s", cluster.name, exc)
            continue
        for item in members:
            yield item, readings
