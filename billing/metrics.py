"""Where usage numbers come from: the only module that talks to Prometheus.

A metrics source answers one question, `hour_usage(hour)`: what each namespace held and used of each GPU resource
during one UTC hour, and what each portal job did. Two sources share that interface:

- `PrometheusSource` reads kube-state-metrics (allocation: GPU requests of running pods) and dcgm-exporter
  (utilisation, memory, power) through the HTTP API, under either scrape setup (promql.py). Aggregation happens in
  PromQL, so the answer is one small series per namespace × resource × GPU model × node however many GPUs the
  cluster has (the node tells apart flavors sharing a resource and model: see nodes.py).
  Each step of the hour (`query_range`) reads the mean of every dcgm-exporter sample in it, and the steps are added
  up here; steps an exporter did not answer are counted, and the hour is billed for what was observed.
- a source plugged in from above for clusters without a Prometheus (`sources.register`): the demo's wiring plugs in
  deterministic series derived from the pods of a sandbox cluster (composition.demo.usage).

`sources.source_for(cluster)` picks a cluster's source.

Resources are keyed the way kube-state-metrics spells them (`nvidia_com_gpu`, `nvidia_com_mig_1g_10gb`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import requests
from django.conf import settings

from . import activity, gpus, promql
from .choices import ScrapeShape
from .devices import claim_labels
from .gpus import JobGpus

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
    # GPU-hours weighted by SM and by tensor-pipe activity (jobs only; read where the exporter reports them).
    sm_active_gpu_hours: float = 0.0
    tensor_active_gpu_hours: float = 0.0

    def add(self, other: Usage) -> None:
        self.allocated_gpu_hours += other.allocated_gpu_hours
        self.used_gpu_hours += other.used_gpu_hours
        self.memory_gib_hours += other.memory_gib_hours
        self.energy_kwh += other.energy_kwh
        self.sm_active_gpu_hours += other.sm_active_gpu_hours
        self.tensor_active_gpu_hours += other.tensor_active_gpu_hours


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
    # The same per node where the series named it: (namespace, resource, model, node) and (resource, model, node).
    # Flavors sharing a resource and model (a spot pool beside a reserved one) are told apart by the node.
    node_namespaces: dict[tuple[str, str, str, str], Usage] = field(default_factory=dict)
    node_capacity: dict[tuple[str, str, str], Capacity] = field(default_factory=dict)
    # Gaps and NaN found in the answers: what was observed is billed, and the hour is partial until re-collected.
    problems: list[str] = field(default_factory=list)
    steps_missing: int = 0
    # How the series carried the pods' labels this hour (a ScrapeShape; '' when no pod held a GPU to show it).
    scrape_shape: str = ""
    # The activity field "used" was read from (a UtilisationSignal; '' when the exporter reported none), and every
    # activity field reported for the whole hour (activity.FIELDS).
    signal: str = ""
    exported: frozenset[str] = frozenset()

    def namespace_usage(self, key: tuple[str, str, str]) -> Usage:
        return self.namespaces.setdefault(key, Usage())

    def node_usage(self, key: tuple[str, str, str], node: str) -> list[Usage]:
        """The namespace's usage and, where the node is known, its part on that node: a measurement adds to both."""
        return [self.namespace_usage(key), *([self.node_namespaces.setdefault((*key, node), Usage())] if node else [])]

    def node_devices(self, key: tuple[str, str], node: str) -> list[Capacity]:
        return [self.capacity.setdefault(key, Capacity()),
                *([self.node_capacity.setdefault((*key, node), Capacity())] if node else [])]

    def job_usage(self, key: tuple[str, str]) -> Usage:
        return self.jobs.setdefault(key, Usage())


class MetricsSource(Protocol):
    def hour_usage(self, hour: datetime) -> HourUsage: ...

    def job_gpus(self, *, namespace: str, job: str, pod_prefix: str, start: datetime, end: datetime) -> JobGpus:
        """Each device the job's pods (label `job`, or named `<pod_prefix>-…`) held in [start, end), step by step."""


def check_hour(hour: datetime) -> datetime:
    if hour.tzinfo is None or hour.utcoffset() is None:
        raise ValueError("the hour must be timezone-aware")
    hour = hour.astimezone(UTC)
    if (hour.minute, hour.second, hour.microsecond) != (0, 0, 0):
        raise ValueError(f"{hour.isoformat()} is not the start of an hour")
    return hour


# --- Prometheus ------------------------------------------------------------------------------------------------

# The queries themselves, and what the series look like upstream, are in promql.py.
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

    def _exported(self, start: datetime, end: datetime, step: int | None = None) -> frozenset[str]:
        """The activity fields dcgm-exporter reported in every step it answered: one added or dropped mid-hour
        counts from the first hour it covers whole, so an hour is read on one signal throughout."""
        step = step or self.step
        steps = {series["metric"].get("field", ""): len(series["values"])
                 for series in self.query_range(promql.activity_fields(step), start, end, step)}
        answered = steps.pop("", 0)
        return frozenset(field for field, count in steps.items() if answered and count >= answered)

    def job_gpus(self, *, namespace: str, job: str, pod_prefix: str, start: datetime, end: datetime) -> JobGpus:
        """Three range queries however many GPUs: the activity fields reported, then activity on the best of them
        and memory, per device of the pods named `<pod_prefix>-…`, less those kube-state-metrics labels as
        another job's (where it exposes the label)."""
        step = gpus.step_for(start, end)
        first, last = gpus.evaluation_times(start, end, step)
        signal = activity.best_signal(self._exported(first, last, step))
        queries = promql.job_gpus(self.shape, step, signal or activity.GR_ENGINE_ACTIVE, namespace=namespace,
                                  pod_prefix=pod_prefix, job=job)
        answers = {name: self.query_range(expr, first, last, step) for name, expr in queries.items()}
        return gpus.from_prometheus(**answers, signal=signal, step=step, start=start, end=end)

    def hour_usage(self, hour: datetime) -> HourUsage:
        hour = check_hour(hour)
        steps = 3600 // self.step
        # Each answer at t covers the step (t - step, t]: evaluated from the end of the first step to the end of the
        # hour, the hour's samples are each read once, and none of the next hour's.
        start, end = hour + timedelta(seconds=self.step), hour + HOUR
        exported = self._exported(start, end)
        signal = activity.best_signal(exported)
        queries = promql.queries(self.shape, self.step, signal or activity.GR_ENGINE_ACTIVE, exported)
        answers = {name: self.query_range(expr, start, end, self.step) for name, expr in queries.items()}
        node_units = self._node_units(hour)
        shapes = {series["metric"].get("shape") for series in self.query(promql.SHAPE, hour + HOUR)}

        usage = HourUsage(hour=hour, steps=steps, signal=signal, exported=exported)
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
            for series in answers.get(name, ()):
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

        def node(labels: dict) -> str:  # kube-state-metrics' `node`, dcgm-exporter's `Hostname` (or `hostname`)
            return labels.get("node") or labels.get("hostname") or labels.get("Hostname") or ""

        for labels, total in integrate("allocated"):
            resource, model = unit(labels, labels.get("resource", ""))
            for measured in usage.node_usage((labels.get("namespace", ""), resource, model), node(labels)):
                measured.allocated_gpu_hours += total
        for labels, total in integrate("dra_allocated"):
            usage.namespace_usage(claim_labels(labels)).allocated_gpu_hours += total
        for name, attr, scale in (("used", "used_gpu_hours", 1), ("memory", "memory_gib_hours", 1 / MIB_PER_GIB),
                                  ("power", "energy_kwh", 3600 / JOULES_PER_KWH)):
            for labels, total in integrate(name):
                for measured in usage.node_usage((labels.get("namespace", ""), *unit(labels)), node(labels)):
                    setattr(measured, attr, getattr(measured, attr) + total * scale)
        for name, attr, scale in (("job_allocated", "allocated_gpu_hours", 1), ("job_used", "used_gpu_hours", 1),
                                  ("job_memory", "memory_gib_hours", 1 / MIB_PER_GIB),
                                  ("job_sm_active", "sm_active_gpu_hours", 1),
                                  ("job_tensor_active", "tensor_active_gpu_hours", 1)):
            for labels, total in integrate(name):
                job = usage.job_usage((labels.get("namespace", ""), labels.get(KSM_JOB_LABEL, "")))
                setattr(job, attr, getattr(job, attr) + total * scale)
        for name in ("capacity", "held"):
            for labels, total in integrate(name):
                for seen in usage.node_devices(unit(labels), node(labels)):
                    setattr(seen, name, getattr(seen, name) + total)
        return usage
