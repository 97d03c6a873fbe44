"""A real Prometheus holding the series of a stock GPU Operator + kube-prometheus-stack install, four times over.

Each variant is one way such a cluster stores its series, three hours long, laid one after another in one TSDB:
- `direct`: the dcgm-exporter ServiceMonitor has honorLabels true, so a held device's series carries the pod's own
  `namespace`/`pod`/`container`, and a device no pod holds carries the exporter pod's (from the scrape target).
- `exported`: honorLabels false (the GPU Operator chart's default), so `namespace`/`pod` always name the exporter pod
  in `gpu-operator` and the pod's labels arrive as `exported_namespace`/`exported_pod`/`exported_container`.
- MIG `mixed`: slices are requested as `nvidia.com/mig-1g.10gb`; `single`: as `nvidia.com/gpu` on the A100 node.

Labels follow the upstream sources (see billing/promql.py): dcgm-exporter's render template and kubernetes
transformation, kube-state-metrics' pod metrics, prometheus-operator's target labels. Samples sit inside each
minute, as real scrapes do: dcgm-exporter every 15 s with four different values a minute, kube-state-metrics every
30 s. In every variant (minutes from the variant's first hour, H0):
- H0: whole H100 and L40S GPUs (one resource name, told apart by GPU model) and 1g.10gb MIG slices of an A100; a pod
  restarting mid-hour (new uid, pending two minutes); a pod that stays pending; pods starting and stopping; a
  namespace no team owns; GPUs no pod holds; the H100 node's exporter renaming `Hostname` to `hostname` at minute 40.
- H1: dcgm-exporter silent for minutes 80-89 (ten steps of the hour): a gap inside the hour.
- H2: one power sample is NaN.
The truth of each hour is computed here from the per-sample values the series are written from, not by the collector.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from tests import prometheus
from tests.requires import unavailable

HOURS = 3  # per variant
VARIANTS = (("direct", "mixed"), ("exported", "single"), ("exported", "mixed"), ("direct", "single"))
FIRST_MINUTE = -10  # data starts a little before H0, so H0's first step has a past
GAP = range(80, 90)  # dcgm-exporter down
GAP_HOUR, NAN_HOUR = 1, 2
NAN_MINUTE = NAN_HOUR * 60 + 17
RELABEL_MINUTE = 40
DCGM_OFFSETS = (7.5, 22.5, 37.5, 52.5)  # seconds into each minute
KSM_OFFSETS = (15.0, 45.0)
MIG_FRACTION = Fraction(1, 7)
H100, L40S, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA L40S", "NVIDIA A100-SXM4-80GB"
JOB_TRAIN, JOB_INFER = 7001, 7002
EXPORTER_NAMESPACE = "gpu-operator"
OWNED = ("alpha", "beta")


@dataclass(frozen=True)
class Device:
    node: str
    gpu: int
    model: str
    profile: str = ""  # MIG profile, "" for a whole GPU
    instance: int = 0  # GPU_I_ID of a MIG slice

    def labels(self, minute: int) -> dict[str, str]:
        """dcgm-exporter's own labels (render_metrics.go): the parent GPU's UUID for a MIG instance."""
        host_label = "hostname" if self.node == "node-h100" and minute >= RELABEL_MINUTE else "Hostname"
        labels = {"gpu": str(self.gpu), "UUID": f"GPU-{self.node}-{self.gpu}",
                  "pci_bus_id": f"00000000:{self.gpu:02d}:00.0", "device": f"nvidia{self.gpu}",
                  "modelName": self.model, host_label: self.node,
                  "DCGM_FI_DRIVER_VERSION": "570.124.06"}
        if self.profile:
            labels.update(GPU_I_PROFILE=self.profile, GPU_I_ID=str(self.instance))
        return labels

    # Per-sample values (k: the sample's index within the minute); whole GPUs report utilisation in percent and the
    # engine-active ratio, MIG slices only the ratio.
    def util_percent(self, minute: int, k: int) -> int:
        return (17 * self.gpu + 7 * minute + 29 * k) % 101

    def engine_active(self, minute: int, k: int) -> float:
        if self.profile:
            return ((13 * self.instance + 11 * minute + 31 * k) % 100) / 100
        return round(self.util_percent(minute, k) * 0.009, 4)

    def fb_used_mib(self, minute: int, k: int) -> int:
        return 1024 * (1 + (self.gpu + self.instance) % 4) + 8 * (minute % 60) + 64 * k

    def power_watts(self, minute: int, k: int) -> float:
        if minute % 180 == NAN_MINUTE and k == 0 and self.node == "node-l40s" and self.gpu == 0:
            return float("nan")
        return 80.0 + 3 * ((5 * self.gpu + minute) % 100) + 11 * k  # a MIG slice reports its parent GPU's power

    def utilisation(self, minute: int, k: int) -> float:
        """What the collector reads: the best field exported for both, graphics engine activity (no SM activity)."""
        return self.engine_active(minute, k)


@dataclass(frozen=True)
class Run:
    """One pod object (one uid) and when it ran; `pending_from` is when it was created."""

    namespace: str
    name: str
    uid: str
    devices: tuple[Device, ...]
    start: int | None  # None: never scheduled
    stop: int | None = None  # minute it stops running (exclusive); None: runs past the data
    pending_from: int = FIRST_MINUTE
    job: int | None = None
    mig: bool = False
    deleted: int | None = None  # minute the object is gone (its series end)

    def running(self, minute: int) -> bool:
        return self.start is not None and self.start <= minute and (self.stop is None or minute < self.stop)

    def phase(self, minute: int) -> str | None:
        if minute < self.pending_from or (self.deleted is not None and minute >= self.deleted):
            return None
        if self.start is None or minute < self.start:
            return "Pending"
        return "Running" if self.running(minute) else "Succeeded"


H100_GPUS = [Device("node-h100", i, H100) for i in range(8)]
L40S_GPUS = [Device("node-l40s", i, L40S) for i in range(4)]
MIG_SLICES = [Device("node-a100", 0, A100, "1g.10gb", i) for i in range(7)]
RUNS = [
    # A pod restarting mid-hour: the first object succeeds at minute 30, its replacement runs from minute 32.
    Run("alpha", "train-0", "uid-train-a", tuple(H100_GPUS[0:4]), start=FIRST_MINUTE, stop=30, job=JOB_TRAIN,
        deleted=30),
    Run("alpha", "train-0", "uid-train-b", tuple(H100_GPUS[0:4]), start=32, pending_from=30, job=JOB_TRAIN),
    Run("alpha", "eval-0", "uid-eval", tuple(H100_GPUS[4:6]), start=15, stop=45),  # across the relabel
    Run("alpha", "tune-0", "uid-tune", tuple(H100_GPUS[4:6]), start=70, stop=100),  # across the gap
    Run("beta", "infer-0", "uid-infer", tuple(MIG_SLICES[0:3]), start=20, stop=100, job=JOB_INFER, mig=True),
    Run("beta", "viz-0", "uid-viz", tuple(L40S_GPUS[0:2]), start=FIRST_MINUTE),
    Run("beta", "wait-0", "uid-wait", (L40S_GPUS[3], L40S_GPUS[3]), start=None),  # pending: asks for 2, gets none
    Run("gamma", "stray-0", "uid-stray", tuple(L40S_GPUS[2:3]), start=FIRST_MINUTE),  # no team owns gamma
]
DEVICES = H100_GPUS + L40S_GPUS + MIG_SLICES
FLAVOR_OF = {"node-h100": "h100", "node-l40s": "l40s", "node-a100": "mig-1g"}
NODE_IP = {"node-h100": "10.0.1.1", "node-l40s": "10.0.1.2", "node-a100": "10.0.1.3"}


def holder(device: Device, minute: int) -> Run | None:
    return next((r for r in RUNS if r.start is not None and device in r.devices and r.running(minute)), None)


def dcgm_up(minute: int) -> bool:
    return minute % 180 not in GAP if minute >= 0 else True


def exporter_target(node: str) -> dict[str, str]:
    """The labels prometheus-operator gives a dcgm-exporter ServiceMonitor target: the exporter pod's own."""
    return {"namespace": EXPORTER_NAMESPACE, "pod": f"nvidia-dcgm-exporter-{node[5:]}",
            "container": "nvidia-dcgm-exporter", "service": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics",
            "job": "nvidia-dcgm-exporter", "instance": f"{NODE_IP[node]}:9400"}


def stored_labels(own: dict[str, str], target: dict[str, str], shape: str) -> dict[str, str]:
    """What Prometheus stores: with honor_labels the scraped labels win; without, a clash renames the scraped one
    exported_<name> and the target's label stays."""
    if shape == "direct":
        return {**target, **own}
    stored = dict(target)
    for key, value in own.items():
        stored[f"exported_{key}" if key in target else key] = value
    return stored


class Scenario:
    def __init__(self, h0: datetime):
        self.h0 = h0

    def variant_start(self, variant: int) -> datetime:
        return self.h0 + timedelta(hours=HOURS * variant)

    def hour(self, index: int, variant: int = 0) -> datetime:
        return self.variant_start(variant) + timedelta(hours=index)

    def at(self, variant: int, minute: int, seconds: float) -> float:
        return (self.variant_start(variant) + timedelta(minutes=minute, seconds=seconds)).timestamp()

    def families(self) -> dict:
        families: dict[str, list] = defaultdict(list)
        for variant, (shape, strategy) in enumerate(VARIANTS):
            self._ksm(families, variant, strategy)
            self._dcgm(families, variant, shape)
        return families

    def _minutes(self, variant: int) -> range:
        # The lead-in before a later variant overlaps the previous variant's last minutes: its series differ only
        # in the values, so those minutes belong to the earlier variant and the lead-in starts at minute 0.
        return range(FIRST_MINUTE if variant == 0 else 0, HOURS * 60)

    def _ksm(self, families, variant: int, strategy: str) -> None:
        target = {"job": "kube-state-metrics", "instance": "10.0.0.5:8080", "service": "kube-state-metrics",
                  "endpoint": "http"}
        for run in RUNS:
            pod = {**target, "namespace": run.namespace, "pod": run.name, "uid": run.uid}
            minutes = [m for m in self._minutes(variant) if run.phase(m) is not None]
            times = [(m, self.at(variant, m, s)) for m in minutes for s in KSM_OFFSETS]
            for phase in ("Pending", "Running", "Succeeded"):
                families["kube_pod_status_phase"].append(
                    ({**pod, "phase": phase}, [(t, 1.0 if run.phase(m) == phase else 0.0) for m, t in times]))
            resource = "nvidia_com_mig_1g_10gb" if run.mig and strategy == "mixed" else "nvidia_com_gpu"
            node = run.devices[0].node if run.start is not None else ""
            for res, unit, amount in ((resource, "integer", float(len(run.devices))), ("cpu", "core", 8.0)):
                families["kube_pod_container_resource_requests"].append(
                    ({**pod, "container": "main", "node": node, "resource": res, "unit": unit},
                     [(t, amount) for _, t in times]))
            families["kube_pod_labels"].append(
                ({**pod, **({"label_gpu_portal_io_job": str(run.job)} if run.job else {})},
                 [(t, 1.0) for _, t in times]))

    def _dcgm(self, families, variant: int, shape: str) -> None:
        fields = {
            "DCGM_FI_DEV_GPU_UTIL": lambda d, m, k: float(d.util_percent(m, k)),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": lambda d, m, k: d.engine_active(m, k),
            "DCGM_FI_DEV_FB_USED": lambda d, m, k: float(d.fb_used_mib(m, k)),
            "DCGM_FI_DEV_POWER_USAGE": lambda d, m, k: d.power_watts(m, k),
        }
        for name, value in fields.items():
            series: dict[tuple, list] = defaultdict(list)
            for device in DEVICES:
                if name == "DCGM_FI_DEV_GPU_UTIL" and device.profile:
                    continue  # not supported on MIG instances
                for m in self._minutes(variant):
                    if not dcgm_up(m):
                        continue
                    own = device.labels(m)
                    run = holder(device, m)
                    if run is not None:  # the kubernetes transformation, only while a pod holds the device
                        own.update(pod=run.name, namespace=run.namespace, container="main", pod_uid=run.uid)
                    labels = stored_labels(own, exporter_target(device.node), shape)
                    key = tuple(sorted(labels.items()))
                    series[key] += [(self.at(variant, m, s), value(device, m, k))
                                    for k, s in enumerate(DCGM_OFFSETS)]
            families[name] += [(dict(key), samples) for key, samples in series.items()]

    # --- the truth, from the same per-sample values -----------------------------------------------------------

    def truth(self, index: int) -> dict[tuple[str, str], dict[str, float]]:
        """(namespace, flavor name) → allocated, used, memory (GiB, hour average), energy (kWh) of hour `index`
        of any variant: each minute a pod runs is allocated; what the devices did is the mean of the minute's
        samples, for the minutes dcgm-exporter answered."""
        totals: dict[tuple[str, str], dict[str, float]] = defaultdict(
            lambda: {"allocated": 0.0, "used": 0.0, "memory": 0.0, "energy": 0.0})
        for minute in range(index * 60, index * 60 + 60):
            for run in RUNS:
                if not run.running(minute) or run.namespace not in OWNED:
                    continue
                row = totals[(run.namespace, FLAVOR_OF[run.devices[0].node])]
                row["allocated"] += len(run.devices) / 60
                if not dcgm_up(minute):
                    continue
                share = float(MIG_FRACTION) if run.mig else 1.0
                power = [sum(d.power_watts(minute, k) for d in run.devices) for k in range(4)]
                for device in run.devices:
                    row["used"] += mean(device.utilisation(minute, k) for k in range(4)) / 60
                    row["memory"] += mean(device.fb_used_mib(minute, k) for k in range(4)) / 1024 / 60
                # A NaN sample spoils its step for the namespace's sum: that step's energy is left out.
                if all(p == p for p in power):
                    row["energy"] += mean(power) * 60 / 3_600_000 * share
        return dict(totals)

    def samples_mean_used(self, index: int, namespace: str) -> float:
        """The plain mean of every stored utilisation sample of the namespace's held devices in the hour, times the
        hours they were held: what an exact integration must come within 0.5 % of."""
        values, held_minutes = [], 0
        for minute in range(index * 60, index * 60 + 60):
            for run in RUNS:
                if run.namespace == namespace and run.running(minute) and dcgm_up(minute):
                    held_minutes += len(run.devices)
                    values += [d.utilisation(minute, k) for d in run.devices for k in range(4)]
        return mean(values) * held_minutes / 60 if values else 0.0

    def capacity_truth(self, index: int) -> dict[str, tuple[float, float]]:
        """flavor → (device-hours the exporters reported, the part running GPU pods held, whoever owns them)."""
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for minute in range(index * 60, index * 60 + 60):
            if not dcgm_up(minute):
                continue
            for device in DEVICES:
                row = totals[FLAVOR_OF[device.node]]
                row[0] += 1 / 60
                if holder(device, minute) is not None:
                    row[1] += 1 / 60
        return {flavor: (c, h) for flavor, (c, h) in totals.items()}

    def job_truth(self, index: int) -> dict[int, dict[str, float]]:
        totals: dict[int, dict[str, float]] = defaultdict(lambda: {"allocated": 0.0, "used": 0.0})
        for minute in range(index * 60, index * 60 + 60):
            for run in RUNS:
                if run.job and run.running(minute):
                    totals[run.job]["allocated"] += len(run.devices) / 60
                    if dcgm_up(minute):
                        totals[run.job]["used"] += sum(mean(d.utilisation(minute, k) for k in range(4))
                                                       for d in run.devices) / 60
        return dict(totals)


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


@pytest.fixture(scope="session")
def prometheus_data(tmp_path_factory):
    """(Prometheus URL, scenario): one server for the whole session, stopped at the end."""
    if prometheus.binaries() is None:
        unavailable("prometheus/promtool are not installed (Debian package 'prometheus'): the collection tests need "
                    "a real Prometheus")
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    scenario = Scenario(now - timedelta(hours=HOURS * len(VARIANTS) + 3))
    path = tmp_path_factory.mktemp("openmetrics") / "series.om.txt"
    prometheus.write_openmetrics(path, scenario.families())
    with prometheus.prometheus_server(path) as url:
        yield url, scenario
