"""Where usage numbers come from: the only module that talks to Prometheus.

A metrics source answers one question, `hour_usage(hour)`: what each namespace held and used of each GPU resource
during one UTC hour, and what each portal job did. Two sources share that interface:

- `PrometheusSource` reads kube-state-metrics (allocation: GPU requests of running pods) and dcgm-exporter
  (utilisation, memory, power) through the HTTP API, under either scrape setup (promql.py). Aggregation happens in
  PromQL, so the answer is one small series per namespace × resource × GPU model however many GPUs the cluster has.
  Each step of the hour (`query_range`) reads the mean of every dcgm-exporter sample in it, and the steps are added
  up here; steps an exporter did not answer are counted, and the hour is billed for what was observed.
- `SandboxSource` derives deterministic series from the pods of a sandbox cluster (the portal's gateway lists
  them), for the embedded default cluster and the demo.

Resources are keyed the way kube-state-metrics spells them (`nvidia_com_gpu`, `nvidia_com_mig_1g_10gb`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import requests
from django.conf import settings

from portal import kube
from portal.naming import managed_selector
from tenants.choices import ScrapeShape

from . import devices, promql
from .devices import claim_labels

HOUR = timedelta(hours=1)
JOB_LABEL, KSM_JOB_LABEL = promql.JOB_LABEL, promql.KSM_JOB_LABEL
WHOLE_GPU = "nvidia_com_gpu"
MIB_PER_GIB = 1024
JOULES_PER_KWH = 3_600_000

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def ksm_resource(name: str) -> str:
    """A resource name as kube-state-metrics labels it: nvidia.com/mig-1g.10gb → nvidia_com_mig_1g_10gb."""
    return _UNSAFE.sub("_", name)


def mig_resource(profile: str) -> str:
    """The resource a dcgm-exporter MIG profile label (GPU_I_PROFILE="1g.10gb") belongs to; '' is a whole GPU."""
    return ksm_resource(f"nvidia.com/mig-{profile}") if profile else WHOLE_GPU


class MetricsError(Exception):
    """The source could not answer (unreachable, timed out, rejected the query); the message says why."""


@dataclass
class Usage:
    """Sums over one hour. GPU-hours count units of the resource (a MIG slice is one unit)."""

    allocated_gpu_hours: float = 0.0
    used_gpu_hours: float = 0.0
    # GiB × hours: divided by the one-hour window it is the average framebuffer held over the hour.
    memory_gib_hours: float = 0.0
    # Energy of the devices held, from their power draw (a MIG slice's is its parent GPU's: see the collector).
    energy_kwh: float = 0.0

    def add(self, other: Usage) -> None:
        self.allocated_gpu_hours += other.allocated_gpu_hours
        self.used_gpu_hours += other.used_gpu_hours
        self.memory_gib_hours += other.memory_gib_hours
        self.energy_kwh += other.energy_kwh


@dataclass
class Capacity:  # device-hours of one kind of GPU unit the exporters reported, and the part running GPU pods held
    capacity: float = 0.0
    held: float = 0.0


@dataclass
class HourUsage:
    hour: datetime
    steps: int = 60
    # (namespace, resource, GPU model or "") → usage. The model tells apart flavors sharing one resource name.
    namespaces: dict[tuple[str, str, str], Usage] = field(default_factory=dict)
    # (namespace, job id as the pod label carries it) → allocation and use of that job's pods.
    jobs: dict[tuple[str, str], Usage] = field(default_factory=dict)
    # (resource, GPU model) → devices seen and held, whoever (or no one) holds them.
    capacity: dict[tuple[str, str], Capacity] = field(default_factory=dict)
    # Gaps and NaN found in the answers: what was observed is billed, and the hour is partial until re-collected.
    problems: list[str] = field(default_factory=list)
    steps_missing: int = 0
    # How the series carried the pods' labels this hour (a ScrapeShape; '' when no pod held a GPU to show it).
    scrape_shape: str = ""

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

# The queries themselves, and what the series look like upstream, are in promql.py.
QUERIES = promql.queries(ScrapeShape.EITHER, settings.BILLING_STEP_SECONDS)
NODE_DEVICES = promql.NODE_DEVICES


class PrometheusSource:
    def __init__(self, url: str, *, timeout: float | None = None, step: int | None = None,
                 session: requests.Session | None = None, shape: str = ScrapeShape.EITHER):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"Prometheus URL must be http(s): {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout if timeout is not None else settings.BILLING_PROMETHEUS_TIMEOUT
        self.step = step or settings.BILLING_STEP_SECONDS
        if 3600 % self.step:
            raise ValueError("the step must divide an hour")
        self.shape = shape
        self.queries = promql.queries(shape, self.step)
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

    def _node_units(self, hour: datetime) -> dict[str, tuple[str, str]]:
        """node → (GPU model, MIG profile) where every device of the node is one model cut one way ('' whole)."""
        kinds: dict[str, set[tuple[str, str]]] = {}
        for series in self.query(promql.NODE_DEVICES, hour + HOUR):
            labels = series["metric"]
            node = labels.get("hostname") or labels.get("Hostname")
            if node:
                kinds.setdefault(node, set()).add((labels.get("modelName", ""), labels.get("GPU_I_PROFILE", "")))
        return {node: next(iter(found)) for node, found in kinds.items() if len(found) == 1}

    def hour_usage(self, hour: datetime) -> HourUsage:
        hour = check_hour(hour)
        steps = 3600 // self.step
        # Each answer at t covers the step (t - step, t]: evaluated from the end of the first step to the end of the
        # hour, the hour's samples are each read once, and none of the next hour's.
        start, end = hour + timedelta(seconds=self.step), hour + HOUR
        answers = {name: self.query_range(expr, start, end, self.step) for name, expr in self.queries.items()}
        node_units = self._node_units(hour)
        shapes = {series["metric"].get("shape") for series in self.query(promql.SHAPE, hour + HOUR)}

        usage = HourUsage(hour=hour, steps=steps)
        usage.scrape_shape = (ScrapeShape.EXPORTED if ScrapeShape.EXPORTED in shapes
                              else ScrapeShape.DIRECT if ScrapeShape.DIRECT in shapes else "")
        hours_per_step = self.step / 3600
        covered = {series["metric"].get("exporter"): len(series["values"]) for series in answers["coverage"]}
        for exporter in promql.EXPORTERS:
            missing = steps - covered.get(exporter, 0)
            if missing > 0:
                usage.steps_missing = max(usage.steps_missing, missing)
                usage.problems.append(f"{exporter} answered for {steps - missing} of {steps} steps")

        def integrate(name: str) -> Iterable[tuple[dict, float]]:
            """Each series' steps summed; a NaN or infinite step is left out (and said), the rest is billed."""
            for series in answers[name]:
                values = [float(value) for _, value in series["values"]]
                finite = [v for v in values if math.isfinite(v)]
                if len(finite) < len(values):
                    usage.problems.append(f"{name}: {len(values) - len(finite)} NaN or infinite steps in "
                                          f"{series['metric']}")
                yield series["metric"], sum(finite) * hours_per_step

        def unit(labels: dict, resource: str = "") -> tuple[str, str]:
            """(resource in kube-state-metrics' spelling, GPU model) of a measurement; a MIG slice is named by its
            profile whichever strategy advertised it."""
            model, profile = labels.get("modelName", ""), labels.get("GPU_I_PROFILE", "")
            if resource:
                node_model, node_profile = node_units.get(labels.get("node", ""), ("", ""))
                model = node_model
                if resource == WHOLE_GPU and node_profile:
                    profile = node_profile  # mig.strategy single: the node's slices are its nvidia.com/gpu
                elif resource != WHOLE_GPU:
                    return resource, model
            return mig_resource(profile), model

        for labels, total in integrate("allocated"):
            resource, model = unit(labels, labels.get("resource", ""))
            usage.namespace_usage((labels.get("namespace", ""), resource, model)).allocated_gpu_hours += total
        for labels, total in integrate("dra_allocated"):
            usage.namespace_usage(claim_labels(labels)).allocated_gpu_hours += total
        for name, attr, scale in (("used", "used_gpu_hours", 1), ("memory", "memory_gib_hours", 1 / MIB_PER_GIB),
                                  ("power", "energy_kwh", 3600 / JOULES_PER_KWH)):
            for labels, total in integrate(name):
                measured = usage.namespace_usage((labels.get("namespace", ""), *unit(labels)))
                setattr(measured, attr, getattr(measured, attr) + total * scale)
        for name, attr in (("job_allocated", "allocated_gpu_hours"), ("job_used", "used_gpu_hours")):
            for labels, total in integrate(name):
                job = usage.job_usage((labels.get("namespace", ""), labels.get(KSM_JOB_LABEL, "")))
                setattr(job, attr, getattr(job, attr) + total)
        for name in ("capacity", "held"):
            for labels, total in integrate(name):
                seen = usage.capacity.setdefault(unit(labels), Capacity())
                setattr(seen, name, getattr(seen, name) + total)
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


def pod_runs(pods: list[dict], *, models: dict[tuple[str, str], tuple[str, float]] | None = None,
             claims: dict[tuple[str, str], Counter] | None = None) -> list[PodRun]:
    """Pods (as the API returns them) that hold GPUs and have started, with their start and end times.

    `models` maps (resource, nodeSelector as sorted items string) to (GPU model, memory GiB of a unit) and, optionally,
    the flavor's own resource name (a MIG slice scheduled as nvidia.com/gpu under `single` is still its profile).
    `claims` maps (namespace, ResourceClaim name) to the devices it holds (devices.claim_devices): a pod holds those
    of the claims its `status.resourceClaimStatuses` names.
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
        units = {(name, *(models or {}).get((name, selector), ("", 80.0))): count for name, count in held.items()}
        for entry in status.get("resourceClaimStatuses") or []:
            for unit, count in (claims or {}).get((meta.get("namespace", ""), entry.get("resourceClaimName")),
                                                  {}).items():
                units[unit] = units.get(unit, 0) + count
        for (name, model, memory, *flavor_resource), count in sorted(units.items()):
            if count <= 0:
                continue
            runs.append(PodRun(namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                               resource=ksm_resource(flavor_resource[0] if flavor_resource else name), gpus=count,
                               started_at=started, finished_at=finished,
                               job=(meta.get("labels") or {}).get(JOB_LABEL, ""), gpu_model=model,
                               memory_gib=memory))
    return runs


class SandboxSource:
    """Deterministic usage from pod runs: allocation from when each pod ran, utilisation from a hash. With
    `capacity` ((resource, GPU model) → units the cluster has), every hour also reports those units as seen, the
    pods' allocation as held (a sandbox has no exporters to say more)."""

    def __init__(self, runs: Callable[[], Iterable[PodRun]], capacity: dict[tuple[str, str], int] | None = None):
        self._runs = runs
        self._capacity = capacity or {}

    @classmethod
    def for_cluster(cls, cluster) -> SandboxSource:
        """The pods of the cluster, listed once however many hours this source is asked about."""
        listed: dict[str, list[PodRun]] = {}

        def runs():
            if "pods" not in listed:
                listed["pods"] = cluster_pod_runs(cluster)
            return listed["pods"]

        return cls(runs, capacity=cluster_capacity(cluster))

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
        for unit, units in self._capacity.items():
            held = sum(u.allocated_gpu_hours for (_, resource, model), u in usage.namespaces.items()
                       if (resource, model) == unit)
            usage.capacity[unit] = Capacity(capacity=float(units), held=min(float(units), held))
        return usage


def cluster_capacity(cluster) -> dict[tuple[str, str], int]:
    """The units each flavor of a sandbox cluster declares, keyed as the collection keys devices."""
    capacity: dict[tuple[str, str], int] = {}
    for flavor in cluster.flavors.all():
        resource = devices.flavor_unit(flavor) if devices.is_dra(flavor) else ksm_resource(flavor.resource_name)
        unit = (resource, flavor.gpu_model)
        capacity[unit] = capacity.get(unit, 0) + flavor.capacity
    return capacity


def cluster_pod_runs(cluster) -> list[PodRun]:
    """The GPU pods the portal's gateway lists in a cluster (those carrying the portal's labels)."""
    strategy = cluster.mig_strategy
    models = {(flavor.scheduled_resource(strategy),
               ",".join(f"{k}={v}" for k, v in sorted(flavor.scheduled_node_labels(strategy).items()))):
              (flavor.gpu_model, float(flavor.memory_gb), flavor.resource_name) for flavor in cluster.flavors.all()}
    dra = {f.device_class: (devices.flavor_unit(f), f.gpu_model, float(f.memory_gb), devices.flavor_unit(f))
           for f in cluster.flavors.all() if devices.is_dra(f)}
    client = kube.client_for_cluster(cluster)
    try:
        pods = client.list("v1", "Pod", label_selector=managed_selector())
        spaces = sorted({p["metadata"].get("namespace", "") for p in pods if (p.get("status") or {}).get(
            "resourceClaimStatuses")}) if dra else []
        claims = client.list_all(("resource.k8s.io/v1", "ResourceClaim", space, "") for space in spaces)
    except kube.KubeError as exc:
        raise MetricsError(f"listing pods in {cluster.name} failed: {exc}") from exc
    return pod_runs(pods, models=models, claims=devices.claim_devices(claims, dra))


def source_for(cluster) -> MetricsSource:
    """A cluster with a Prometheus URL is read from it; a sandbox cluster without one gets synthetic series."""
    if cluster.prometheus_url:
        return PrometheusSource(cluster.prometheus_url, shape=cluster.scrape_shape)
    if cluster.connection == "sandbox":
        return SandboxSource.for_cluster(cluster)
    raise MetricsError(f"cluster {cluster.name} has no Prometheus URL: usage cannot be collected")
