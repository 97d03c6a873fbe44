"""A job's GPUs one by one over a range of time: what each device its pods held did (activity on the cluster's best
signal) and how much framebuffer memory it held, as Run:ai's and Grafana's DCGM views show them.

Read live from the cluster's usage source (`job_gpus(...)` of metrics.PrometheusSource or of a plugged-in source),
never stored: the portal keeps usage per job and hour, not per device. Every source answers in this module's
shape; the parsing of Prometheus' answers is here, the queries in promql.py. No database, no settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from . import activity

MIB_PER_GIB = 1024
MAX_POINTS = 300  # per GPU and metric: enough for a chart, few enough for a page
MIN_STEP = 60  # seconds: dcgm-exporter samples every few seconds, Prometheus scrapes every 15-60 s


def step_for(start: datetime, end: datetime, *, points: int = MAX_POINTS) -> int:
    """Seconds per point so that [start, end) gives at most `points` points: whole minutes, at least one."""
    seconds = max(0.0, (end - start).total_seconds())
    return max(MIN_STEP, math.ceil(seconds / points / MIN_STEP) * MIN_STEP)


def evaluation_times(start: datetime, end: datetime, step: int) -> tuple[datetime, datetime]:
    """The first and last evaluation time of a range query whose answers each cover the step ending there: from
    the end of the first step to the end of the step holding `end` (one step when the range is shorter)."""
    steps = max(1, math.ceil((end - start).total_seconds() / step))
    return start + timedelta(seconds=step), start + timedelta(seconds=step * steps)


@dataclass(frozen=True)
class Gpu:
    """One device a pod held: dcgm-exporter's `UUID` and `gpu` index, for a MIG instance its profile and GPU_I_ID."""

    uuid: str
    index: str
    node: str
    model: str
    pod: str
    profile: str = ""
    instance: str = ""

    @property
    def name(self) -> str:
        """How charts and tables call it: "node-a GPU 3", "node-b GPU 0 1g.10gb #2"."""
        name = f"{self.node or 'unknown node'} GPU {self.index}"
        return f"{name} {self.profile} #{self.instance}" if self.profile else name


@dataclass
class GpuSeries:
    """One device's steps: activity 0..1 and memory used in GiB, by the end time of each step."""

    gpu: Gpu
    utilisation: dict[datetime, float] = field(default_factory=dict)
    memory_gib: dict[datetime, float] = field(default_factory=dict)

    @staticmethod
    def _mean(values) -> float | None:
        values = list(values)
        return sum(values) / len(values) if values else None

    @property
    def utilisation_mean(self) -> float | None:
        return self._mean(self.utilisation.values())

    @property
    def utilisation_max(self) -> float | None:
        return max(self.utilisation.values(), default=None)

    @property
    def memory_mean(self) -> float | None:
        return self._mean(self.memory_gib.values())

    @property
    def memory_max(self) -> float | None:
        return max(self.memory_gib.values(), default=None)

    def verdict(self, *, signal: str, threshold: float) -> activity.Verdict | None:
        """Whether this GPU worked over the range (its mean activity), None when no step was reported."""
        mean = self.utilisation_mean
        if mean is None:
            return None
        return activity.judge_idle(signal=signal, utilisation=mean, threshold=threshold,
                                   memory_gib=self.memory_mean or 0.0)


@dataclass
class JobGpus:
    """What a source answered for a job's devices over [start, end): the signal activity was read on, the step."""

    signal: str
    step: int
    start: datetime
    end: datetime
    gpus: list[GpuSeries] = field(default_factory=list)

    @property
    def step_label(self) -> str:
        """The step in words: "1 minute", "5 minutes", "2 hours"."""
        if self.step % 3600 == 0:
            return "1 hour" if self.step == 3600 else f"{self.step // 3600} hours"
        minutes = self.step // 60
        return "1 minute" if minutes == 1 else f"{minutes} minutes"


# --- Prometheus' answers ---------------------------------------------------------------------------------------

def _gpu(labels: dict) -> Gpu:
    """A device from a series of promql.job_gpus: the node is `Hostname`, or `hostname` in newer exporters."""
    return Gpu(uuid=labels.get("UUID", ""), index=labels.get("gpu", ""),
               node=labels.get("Hostname") or labels.get("hostname") or "", model=labels.get("modelName", ""),
               pod=labels.get("pod", ""), profile=labels.get("GPU_I_PROFILE", ""),
               instance=labels.get("GPU_I_ID", ""))


def _identity(gpu: Gpu) -> tuple[str, str, str, str]:
    # One device for one pod: a series renamed mid-range (Hostname → hostname) is the same device, so is not a key.
    return gpu.uuid, gpu.instance, gpu.index, gpu.pod


def from_prometheus(*, utilisation: list[dict], memory: list[dict], signal: str, step: int, start: datetime,
                    end: datetime) -> JobGpus:
    """JobGpus from the answers to promql.job_gpus' two range queries. A device whose series was split (its node
    label renamed mid-range) is one GPU; a step both halves answered reads their mean. NaN steps are left out."""
    found: dict[tuple, GpuSeries] = {}
    for answer, attr, scale in ((utilisation, "utilisation", 1.0), (memory, "memory_gib", 1 / MIB_PER_GIB)):
        seen: dict[tuple, dict[datetime, list[float]]] = {}
        for series in answer:
            gpu = _gpu(series["metric"])
            key = _identity(gpu)
            known = found.setdefault(key, GpuSeries(gpu))
            if gpu.node and not known.gpu.node:
                known.gpu = gpu
            steps = seen.setdefault(key, {})
            for at, value in series["values"]:
                value = float(value)
                if math.isfinite(value):
                    steps.setdefault(datetime.fromtimestamp(float(at), UTC), []).append(value * scale)
        for key, steps in seen.items():
            setattr(found[key], attr, {at: sum(v) / len(v) for at, v in sorted(steps.items())})
    gpus = sorted(found.values(), key=lambda s: (s.gpu.node, s.gpu.pod, _index(s.gpu.index), s.gpu.instance))
    return JobGpus(signal=signal, step=step, start=start, end=end, gpus=gpus)


def _index(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (-1, value)
