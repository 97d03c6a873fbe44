"""Where usage numbers come from: the only module that talks to Prometheus.

A metrics source answers one question, `hour_usage(hour)`: what each namespace held and used of each GPU resource
during one UTC hour, and what each portal job did. Two sources share that interface:

- `PrometheusSource` reads kube-state-metrics (allocation: GPU requests of running pods) and dcgm-exporter
  (utilisation, memory, power) through the HTTP API. Aggregation happens in PromQL, so the answer is one small
  series per namespace × resource × GPU model however many GPUs the cluster has. Each query is sampled every
  `step` seconds across the hour (`query_range`), and the samples are integrated here; that also shows the gaps.
- `SandboxSource` derives deterministic series from the pods of a sandbox cluster (the portal's gateway lists
  them), for the embedded default cluster and the demo.

Resources are keyed the way kube-state-metrics spells them (`nvidia_com_gpu`, `nvidia_com_mig_1g_10gb`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import requests
from django.conf import settings

from portal import kube
from portal.naming import managed_selector

HOUR = timedelta(hours=1)
JOB_LABEL = "gpu-portal.io/job"
# kube-state-metrics exposes allow-listed pod labels on kube_pod_labels as label_<sanitized name>.
KSM_JOB_LABEL = "label_gpu_portal_io_job"
GPU_RESOURCES = 'resource=~"nvidia_com_gpu|nvidia_com_mig_.*"'
MIB_PER_GIB = 1024
JOULES_PER_KWH = 3_600_000

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def ksm_resource(name: str) -> str:
    """A resource name as kube-state-metrics labels it: nvidia.com/mig-1g.10gb → nvidia_com_mig_1g_10gb."""
    return _UNSAFE.sub("_", name)


def mig_resource(profile: str) -> str:
    """The resource a dcgm-exporter MIG profile label (GPU_I_PROFILE="1g.10gb") belongs to; '' is a whole GPU."""
    return ksm_resource(f"nvidia.com/mig-{profile}") if profile else "nvidia_com_gpu"


class MetricsError(Exception):
    """The source could not answer (unreachable, timed out, rejected the query); the message says why."""


@dataclass
class Usage:
    """Sums over one hour. GPU-hours count units of the resource (a MIG slice is one unit)."""

    allocated_gpu_hours: float = 0.0
    used_gpu_hours: float = 0.0
    # GiB × hours: divided by the one-hour window it is the average framebuffer held over the hour.
    memory_gib_hours: float = 0.0
    # Energy of the devices held, from their power draw. MIG instances report their parent GPU's power;
    # the collector charges a slice its fraction of it.
    energy_kwh: float = 0.0

    def add(self, other: Usage) -> None:
        self.allocated_gpu_hours += other.allocated_gpu_hours
        self.used_gpu_hours += other.used_gpu_hours
        self.memory_gib_hours += other.memory_gib_hours
        self.energy_kwh += other.energy_kwh


@dataclass
class HourUsage:
    hour: datetime
    # (namespace, resource, GPU model or "") → usage. The model tells apart flavors sharing one resource name.
    namespaces: dict[tuple[str, str, str], Usage] = field(default_factory=dict)
    # (namespace, job id as the pod label carries it) → allocation and use of that job's pods.
    jobs: dict[tuple[str, str], Usage] = field(default_factory=dict)
    # Gaps and NaN found in the answers: the hour is partial and must not be trusted.
    problems: list[str] = field(default_factory=list)

    def namespace_usage(self, key: tuple[str, str, str]) -> Usage:
        return self.namespaces.setdefault(key, Usage())

    def job_usage(self, key: tuple[str, str]) -> Usage:
        return self.jobs.setdefault(key, Usage())


class MetricsSource(Protocol):
    def hour_usage(self, hour: datetime) -> HourUsage: ...


def check_hour(hour: datetime) -> datetime:
    if hour.tzinfo is None or hour.utcoffset() is None:
        raise ValueError("the hour must be timezone-aware")
    hour = hour.astimezone(UTC)
    if (hour.minute, hour.second, hour.microsecond) != (0, 0, 0):
        raise ValueError(f"{hour.isoformat()} is not the start of an hour")
    return hour


# --- Prometheus ------------------------------------------------------------------------------------------------

# A pod counts while kube-state-metrics reports it Running. `max by` folds duplicate exporters (HA replicas).
RUNNING = 'max by (namespace, pod) (kube_pod_status_phase{phase="Running"} == 1)'
POD_JOB = f'max by (namespace, pod, {KSM_JOB_LABEL}) (kube_pod_labels{{{KSM_JOB_LABEL}!=""}})'
GPU_REQUESTS = f"kube_pod_container_resource_requests{{{GPU_RESOURCES}}}"
# dcgm-exporter series are summed per pod first (one series per device → one per pod), so the joins with pod
# phase and labels run over pods, not devices. The hostname label (`Hostname`, or `hostname` in newer exporters)
# is summed away, so either spelling, or a rename mid-hour, counts each device once.
PER_POD = "namespace, pod, GPU_I_PROFILE, modelName"


def _per_pod(metric: str, matchers: str = "") -> str:
    return f'sum by ({PER_POD}) ({metric}{{pod!=""{matchers}}})'


# Utilisation as a 0..1 ratio: GPU_UTIL does not exist for MIG instances, the graphics engine activity does.
WHOLE, MIG = ', GPU_I_PROFILE=""', ', GPU_I_PROFILE!=""'
UTILISATION = (_per_pod("DCGM_FI_DEV_GPU_UTIL", WHOLE) + " / 100 or "
               + _per_pod("DCGM_FI_PROF_GR_ENGINE_ACTIVE", MIG))


def _running(expr: str) -> str:
    return f"({expr}) * on (namespace, pod) group_left () {RUNNING}"


def _per_job(expr: str) -> str:
    labelled = f"{_running(expr)} * on (namespace, pod) group_left ({KSM_JOB_LABEL}) {POD_JOB}"
    return f"sum by (namespace, {KSM_JOB_LABEL}) ({labelled})"


QUERIES = {
    "allocated": f"sum by (namespace, resource, node) ({_running(GPU_REQUESTS)})",
    "used": f"sum by (namespace, GPU_I_PROFILE, modelName) ({_running(UTILISATION)})",
    "memory": f"sum by (namespace, GPU_I_PROFILE, modelName) ({_running(_per_pod('DCGM_FI_DEV_FB_USED'))})",
    "power": f"sum by (namespace, GPU_I_PROFILE, modelName) ({_running(_per_pod('DCGM_FI_DEV_POWER_USAGE'))})",
    "job_allocated": _per_job(GPU_REQUESTS),
    "job_used": _per_job(UTILISATION),
    # How many steps each exporter answered: fewer than the hour's steps is a gap.
    "coverage": ('label_replace(count(kube_pod_status_phase), "exporter", "kube-state-metrics", "", "") '
                 'or label_replace(count(DCGM_FI_DEV_POWER_USAGE), "exporter", "dcgm-exporter", "", "")'),
}
# The node each GPU model sits on, to tell apart flavors that share a resource name (A100 vs L40S pools).
NODE_MODELS = "count by (Hostname, hostname, modelName) (last_over_time(DCGM_FI_DEV_POWER_USAGE[1h]))"
EXPORTERS = ("kube-state-metrics", "dcgm-exporter")


class PrometheusSource:
    def __init__(self, url: str, *, timeout: float | None = None, step: int | None = None,
                 session: requests.Session | None = None):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"Prometheus URL must be http(s): {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout if timeout is not None else settings.BILLING_PROMETHEUS_TIMEOUT
        self.step = step or settings.BILLING_STEP_SECONDS
        if 3600 % self.step:
            raise ValueError("the step must divide an hour")
        self.session = session or requests.Session()

    # -- HTTP API

    def _get(self, path: str, params: dict) -> dict:
        try:
            response = self.session.get(f"{self.url}{path}", params=params, timeout=self.timeout)
        except requests.Timeout as exc:
            raise MetricsError(f"Prometheus at {self.url} did not answer within {self.timeout:g} s") from exc
        except requests.RequestException as exc:
            # The library's text repeats the whole query URL; its cause is the part worth showing.
            reason = str(exc).split("Caused by ", 1)[-1].rstrip(")")
            raise MetricsError(f"Prometheus at {self.url} is unreachable: {reason}") from exc
        try:
            body = response.json()
        except ValueError:
            raise MetricsError(f"Prometheus answered {response.status_code} without JSON: "
                               f"{response.text[:200]}") from None
        if response.status_code != 200 or body.get("status") != "success":
            raise MetricsError(f"Prometheus answered {response.status_code} "
                               f"{body.get('errorType', 'error')}: {body.get('error', response.text[:200])}")
        return body["data"]

    def query_range(self, expr: str, start: datetime, end: datetime, step: int) -> list[dict]:
        data = self._get("/api/v1/query_range", {"query": expr, "start": start.timestamp(),
                                                  "end": end.timestamp(), "step": step})
        return data["result"]

    def query(self, expr: str, at: datetime) -> list[dict]:
        return self._get("/api/v1/query", {"query": expr, "time": at.timestamp()})["result"]

    # -- one hour

    def hour_usage(self, hour: datetime) -> HourUsage:
        hour = check_hour(hour)
        steps = 3600 // self.step
        # Samples at the start of each step stand for that step: [hour, hour + 1h) and never the next hour.
        start, end = hour, hour + HOUR - timedelta(seconds=self.step)
        answers = {name: self.query_range(expr, start, end, self.step) for name, expr in QUERIES.items()}
        node_models = {}
        for series in self.query(NODE_MODELS, hour + HOUR):
            labels = series["metric"]
            node = labels.get("hostname") or labels.get("Hostname")
            if node:
                node_models[node] = labels.get("modelName", "")

        usage = HourUsage(hour=hour)
        hours_per_step = self.step / 3600
        covered = {series["metric"].get("exporter"): len(series["values"]) for series in answers["coverage"]}
        for exporter in EXPORTERS:
            if covered.get(exporter, 0) < steps:
                usage.problems.append(f"{exporter} answered for {covered.get(exporter, 0)} of {steps} steps")

        def integrate(name: str) -> Iterable[tuple[dict, float]]:
            for series in answers[name]:
                values = [float(value) for _, value in series["values"]]
                if not all(math.isfinite(v) for v in values):
                    usage.problems.append(f"{name}: NaN or infinite samples in {series['metric']}")
                    continue
                yield series["metric"], sum(values) * hours_per_step

        for labels, total in integrate("allocated"):
            key = (labels.get("namespace", ""), labels.get("resource", ""), node_models.get(labels.get("node"), ""))
            usage.namespace_usage(key).allocated_gpu_hours += total
        for name, attr, scale in (("used", "used_gpu_hours", 1), ("memory", "memory_gib_hours", 1 / MIB_PER_GIB),
                                  ("power", "energy_kwh", 3600 / JOULES_PER_KWH)):
            for labels, total in integrate(name):
                key = (labels.get("namespace", ""), mig_resource(labels.get("GPU_I_PROFILE", "")),
                       labels.get("modelName", ""))
                setattr(usage.namespace_usage(key), attr, getattr(usage.namespace_usage(key), attr) + total * scale)
        for name, attr in (("job_allocated", "allocated_gpu_hours"), ("job_used", "used_gpu_hours")):
            for labels, total in integrate(name):
                job = usage.job_usage((labels.get("namespace", ""), labels.get(KSM_JOB_LABEL, "")))
                setattr(job, attr, getattr(job, attr) + total)
        return usage


# --- sandbox ---------------------------------------------------------------------------------------------------

GPU_PREFIX = "nvidia.com/"


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (same pod and hour → same value on every run)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def pod_utilisation(pod_name: str, hour: datetime) -> float:
    """Synthetic utilisation 0..1: about one pod-hour in eight idles (under 5 %), the rest work at 35–95 %."""
    if unit(pod_name, "idle", hour.date()) < 0.125:
        return round(0.04 * unit(pod_name, hour), 4)
    return round(0.35 + 0.6 * unit(pod_name, hour), 4)


@dataclass(frozen=True)
class PodRun:
    """What a pod held and when: the facts a sandbox pod (or a synthetic history) gives the sandbox source."""

    namespace: str
    name: str
    resource: str  # kube-state-metrics spelling
    gpus: int
    started_at: datetime
    finished_at: datetime | None  # None while it runs
    job: str = ""
    gpu_model: str = ""
    memory_gib: float = 80.0  # of one unit
    max_power_watts: float = 700.0  # of the device (the parent GPU for a MIG slice)


def pod_runs(pods: list[dict], *, models: dict[tuple[str, str], tuple[str, float]] | None = None) -> list[PodRun]:
    """Pods (as the API returns them) that hold GPUs and have started, with their start and end times.

    `models` maps (resource, nodeSelector as sorted items string) to (GPU model, memory GiB of a unit).
    """
    runs = []
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        started = _parse_time(status.get("startTime"))
        if started is None:
            continue
        held: dict[str, int] = {}
        for container in spec.get("containers") or []:
            resources = container.get("resources") or {}
            amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            for name, amount in amounts.items():
                if name.startswith(GPU_PREFIX):
                    held[name] = held.get(name, 0) + int(amount)
        finished = None
        if status.get("phase") in ("Succeeded", "Failed"):
            # Containers' termination times, else the moment the pod stopped being ready.
            ends = [_parse_time(((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))
                    for s in status.get("containerStatuses") or []]
            ends += [_parse_time(c.get("lastTransitionTime")) for c in status.get("conditions") or []
                     if c.get("type") == "Ready" and c.get("status") == "False"]
            finished = max((e for e in ends if e), default=started)
        selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("nodeSelector") or {}).items()))
        for name, count in sorted(held.items()):
            if count <= 0:
                continue
            model, memory = (models or {}).get((name, selector), ("", 80.0))
            runs.append(PodRun(namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                               resource=ksm_resource(name), gpus=count, started_at=started, finished_at=finished,
                               job=(meta.get("labels") or {}).get(JOB_LABEL, ""), gpu_model=model,
                               memory_gib=memory))
    return runs


class SandboxSource:
    """Deterministic usage from pod runs: allocation from when each pod ran, utilisation from a hash."""

    def __init__(self, runs: Callable[[], Iterable[PodRun]]):
        self._runs = runs

    @classmethod
    def for_cluster(cls, cluster) -> SandboxSource:
        """The pods of the cluster, listed once however many hours this source is asked about."""
        listed: dict[str, list[PodRun]] = {}

        def runs():
            if "pods" not in listed:
                listed["pods"] = cluster_pod_runs(cluster)
            return listed["pods"]

        return cls(runs)

    def hour_usage(self, hour: datetime) -> HourUsage:
        hour = check_hour(hour)
        end = hour + HOUR
        usage = HourUsage(hour=hour)
        for run in self._runs():
            overlap = (min(run.finished_at or end, end) - max(run.started_at, hour)).total_seconds()
            if overlap <= 0:
                continue
            held = run.gpus * overlap / 3600
            utilisation = pod_utilisation(run.name, hour)
            row = Usage(allocated_gpu_hours=held, used_gpu_hours=held * utilisation,
                        memory_gib_hours=held * run.memory_gib * min(1.0, 0.2 + utilisation),
                        energy_kwh=held * run.max_power_watts * (0.1 + 0.9 * utilisation) / 1000)
            usage.namespace_usage((run.namespace, run.resource, run.gpu_model)).add(row)
            if run.job:
                usage.job_usage((run.namespace, run.job)).add(
                    Usage(allocated_gpu_hours=row.allocated_gpu_hours, used_gpu_hours=row.used_gpu_hours))
        return usage


def cluster_pod_runs(cluster) -> list[PodRun]:
    """The GPU pods the portal's gateway lists in a cluster (those carrying the portal's labels)."""
    models = {(flavor.resource_name, ",".join(f"{k}={v}" for k, v in sorted(flavor.node_labels.items()))):
              (flavor.gpu_model, float(flavor.memory_gb)) for flavor in cluster.flavors.all()}
    try:
        pods = kube.client_for_cluster(cluster).list("v1", "Pod", label_selector=managed_selector())
    except kube.KubeError as exc:
        raise MetricsError(f"listing pods in {cluster.name} failed: {exc}") from exc
    return pod_runs(pods, models=models)


def source_for(cluster) -> MetricsSource:
    """A cluster with a Prometheus URL is read from it; a sandbox cluster without one gets synthetic series."""
    if cluster.prometheus_url:
        return PrometheusSource(cluster.prometheus_url)
    if cluster.connection == "sandbox":
        return SandboxSource.for_cluster(cluster)
    raise MetricsError(f"cluster {cluster.name} has no Prometheus URL: usage cannot be collected")
