"""Collecting one hour of 10,000 GPUs from a real Prometheus, against the time of its queries alone (issue 6).

The floor sends the collector's own PromQL (same expressions, range and step) with a bare keep-alive HTTP session
and decodes the JSON: what any collector must pay. The collection adds integration, mapping to teams and flavors,
and the database transaction that replaces the hour's rows.
"""

import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.support import django_setup, median, table, test_database

GPUS = 10_000
GPUS_PER_NODE = 8
TEAMS = 250
ROUNDS = 3
MODEL = "NVIDIA H100 80GB HBM3"


def _series(hour: datetime):
    """kube-state-metrics and dcgm-exporter series for one hour, one sample a minute (half-way through it); a pod of
    8 GPUs per node, every tenth pod stopping half-way through the hour. dcgm-exporter is scraped as the GPU Operator
    sets it up (honorLabels false): the pod's labels arrive as exported_*, the target's name the exporter pod."""
    from tests.billing.conftest import FIRST_MINUTE

    minutes = range(FIRST_MINUTE, 60)
    at = [(hour + timedelta(minutes=m, seconds=30)).timestamp() for m in minutes]
    pods = []
    for node in range(GPUS // GPUS_PER_NODE):
        namespace, name = f"team-{node % TEAMS:03d}", f"train-{node:05d}"
        stop = 30 if node % 10 == 0 else None
        pods.append((node, namespace, name, stop))

    def running(stop, m):
        return stop is None or m < stop

    phases = []
    requests = []
    labels = []
    for node, namespace, name, stop in pods:
        pod = {"namespace": namespace, "pod": name, "uid": f"u{node}"}
        for phase in ("Running", "Succeeded"):
            values = [float(running(stop, m) == (phase == "Running")) for m in minutes]
            phases.append(({**pod, "phase": phase}, list(zip(at, values, strict=True))))
        requests.append(({**pod, "container": "main", "node": f"node-{node:05d}", "resource": "nvidia_com_gpu",
                          "unit": "integer"}, [(t, float(GPUS_PER_NODE)) for t in at]))
        labels.append(({**pod, "label_gpu_portal_io_job": str(node)}, [(t, 1.0) for t in at]))

    def dcgm(value):
        out = []
        for node, namespace, name, stop in pods:
            for gpu in range(GPUS_PER_NODE):
                device = {"gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", "modelName": MODEL,
                          "Hostname": f"node-{node:05d}", "namespace": "gpu-operator",
                          "pod": f"nvidia-dcgm-exporter-{node:05d}", "container": "nvidia-dcgm-exporter",
                          "job": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics"}
                held = [m for m in minutes if running(stop, m)]
                idle = [m for m in minutes if not running(stop, m)]
                out.append(({**device, "exported_namespace": namespace, "exported_pod": name,
                             "exported_container": "main", "pod_uid": f"u{node}"},
                            [(at[m - FIRST_MINUTE], value(gpu, m)) for m in held]))
                if idle:
                    out.append((device, [(at[m - FIRST_MINUTE], value(gpu, m)) for m in idle]))
        return out

    return {
        "kube_pod_status_phase": phases,
        "kube_pod_container_resource_requests": requests,
        "kube_pod_labels": labels,
        "DCGM_FI_DEV_GPU_UTIL": dcgm(lambda gpu, m: float((13 * gpu + 7 * m) % 101)),
        "DCGM_FI_DEV_FB_USED": dcgm(lambda gpu, m: float(20_000 + 100 * gpu + m)),
        "DCGM_FI_DEV_POWER_USAGE": dcgm(lambda gpu, m: float(300 + 3 * gpu + m)),
    }


def _floor(url: str, hour: datetime) -> float:
    """The collector's queries alone, through a bare keep-alive session; returns seconds."""
    import requests

    from billing import activity, metrics, promql

    step = 60
    source = metrics.PrometheusSource(url, step=step)
    start, end = hour + timedelta(seconds=step), hour + metrics.HOUR
    with requests.Session() as session:
        started = time.perf_counter()
        exported = source._exported(start, end)  # the collector's own first question: which fields to read
        signal = activity.best_signal(exported) or activity.GR_ENGINE_ACTIVE
        for expr in promql.queries(source.shape, step, signal, exported).values():
            response = session.get(f"{url}/api/v1/query_range", params={
                "query": expr, "start": (hour + timedelta(seconds=step)).timestamp(),
                "end": (hour + metrics.HOUR).timestamp(), "step": step}, timeout=120)
            response.raise_for_status()
            response.json()
        for expr in (promql.NODE_DEVICES, promql.SHAPE):
            response = session.get(f"{url}/api/v1/query", params={
                "query": expr, "time": (hour + metrics.HOUR).timestamp()}, timeout=120)
            response.raise_for_status()
            response.json()
        return time.perf_counter() - started


def run() -> str:
    from tests import prometheus

    if prometheus.binaries() is None:
        return ("## Usage collection (10,000 GPUs, real Prometheus)\n\nNot run: needs Debian's `prometheus` package "
                "(`prometheus` and `promtool`).\n")
    django_setup()
    from django.conf import settings

    from billing import services
    from billing.models import CapacityHour, ClusterUsageSource, UsageHour
    from tenants.models import Cluster, GpuFlavor, Team, TeamNamespace

    settings.BILLING_PROMETHEUS_TIMEOUT = 600  # shared benchmark machines are slow; the ratio is what counts
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    with tempfile.TemporaryDirectory(prefix="bench-usage-") as tmp:
        path = Path(tmp) / "series.om.txt"
        started = time.perf_counter()
        samples = prometheus.write_openmetrics(path, _series(hour))
        written = time.perf_counter() - started
        with prometheus.prometheus_server(path, start_timeout=600) as url, test_database():
            cluster = Cluster.objects.create(name="bench", server="http://127.0.0.1:9")
            ClusterUsageSource.objects.create(cluster=cluster, prometheus_url=url)
            GpuFlavor.objects.create(cluster=cluster, name="h100", gpu_model=MODEL, capacity=GPUS)
            teams = Team.objects.bulk_create([Team(slug=f"team-{i:03d}", name=f"Team {i}") for i in range(TEAMS)])
            TeamNamespace.objects.bulk_create([TeamNamespace(team=team, cluster=cluster) for team in teams])

            _floor(url, hour)  # warm-up: blocks read into the page cache, query paths compiled
            floors, collections = [], []
            for _ in range(ROUNDS):
                floors.append(_floor(url, hour))
                started = time.perf_counter()
                ledger = services.usage_collect_hour(cluster=cluster, hour=hour)
                collections.append(time.perf_counter() - started)
                if ledger.state != "collected":
                    raise RuntimeError(f"collection failed: {ledger.state} {ledger.message}")
            tracemalloc.start()
            services.usage_collect_hour(cluster=cluster, hour=hour)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            allocated = sum(float(r.allocated_gpu_hours) for r in UsageHour.objects.filter(hour=hour))
            held = sum(float(r.allocated_gpu_hours) for r in CapacityHour.objects.filter(hour=hour))
            rows = UsageHour.objects.filter(hour=hour).count()
    expected = GPUS - (GPUS // GPUS_PER_NODE // 10) * GPUS_PER_NODE * 0.5
    if abs(allocated - expected) > 1e-3 or abs(held - expected) > 1e-3:
        raise RuntimeError(f"collected {allocated} GPU-hours ({held} held by the exporter's account), the series "
                           f"hold {expected}")
    floor, collect = median(floors), median(collections)
    return (
        "## Usage collection (10,000 GPUs, real Prometheus)\n\n"
        f"One hour of {GPUS:,} whole GPUs ({GPUS // GPUS_PER_NODE:,} pods of {GPUS_PER_NODE} GPUs in {TEAMS} team "
        f"namespaces, every tenth pod stopping mid-hour): {samples:,} samples of dcgm-exporter and "
        f"kube-state-metrics series (written in {written:.0f} s) loaded into Debian's Prometheus with promtool. "
        "dcgm-exporter's series are stored as with the GPU Operator's default honorLabels false (exported_* labels) "
        "and read without being told so. The floor sends the collector's PromQL (60 s steps over the hour, each the "
        "mean of its samples; node devices and scrape shape) with a bare keep-alive session and decodes "
        "the JSON; the collection is `usage_collect_hour` end to end (queries, integration, team and flavor mapping, "
        f"the transaction replacing the hour's {rows} rows). Median of {ROUNDS}; target ≤ 1.5×. Collected "
        f"{allocated:,.1f} GPU-hours, equal to the series' {expected:,.1f}.\n\n"
        + table(["queries alone", "collection", "ratio", "peak Python memory of a collection"],
                [[f"{floor * 1000:.0f} ms", f"{collect * 1000:.0f} ms", f"**{collect / floor:.2f}×**",
                  f"{peak / 2**20:.1f} MiB"]])
        + "\n"
    )
