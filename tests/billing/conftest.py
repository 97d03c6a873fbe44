"""A real Prometheus holding five hours of synthetic dcgm-exporter and kube-state-metrics series.

The scenario (minutes counted from the first hour, H0):
- H0, H1: whole H100 GPUs and L40S GPUs (same resource name, told apart by GPU model), three MIG 1g.10gb slices;
  pods starting and stopping mid-hour; the H100 node's exporter renames its `Hostname` label to `hostname` at
  minute 90, in the middle of a pod's run; a pod in a namespace no team owns.
- H2: nothing at all (both exporters down for the hour).
- H3: complete again.
- H4: one power sample is NaN.
The truth of each hour is computed here from the same per-minute values the series are written from.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests import prometheus
from tests.requires import unavailable

HOURS = 5
FIRST_MINUTE = -10  # data starts a little before H0, so H0's first sample has a past
MISSING_HOUR = 2
NAN_HOUR = 4
NAN_MINUTE = NAN_HOUR * 60 + 17
RELABEL_MINUTE = 90
MIG_FRACTION = Decimal("0.1429")
H100, L40S, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA L40S", "NVIDIA A100-SXM4-80GB"
JOB_TRAIN, JOB_INFER = 7001, 7002


@dataclass(frozen=True)
class Device:
    node: str
    gpu: int
    model: str
    profile: str = ""  # MIG profile, "" for a whole GPU
    instance: int = 0  # GPU_I_ID of a MIG slice

    @property
    def uuid(self) -> str:
        return f"GPU-{self.node}-{self.gpu}"

    def labels(self, minute: int) -> dict[str, str]:
        host_label = "hostname" if self.node == "node-h100" and minute >= RELABEL_MINUTE else "Hostname"
        labels = {"gpu": str(self.gpu), "UUID": self.uuid, "device": f"nvidia{self.gpu}", "modelName": self.model,
                  host_label: self.node, "DCGM_FI_DRIVER_VERSION": "570.124.06"}
        if self.profile:
            labels.update(GPU_I_PROFILE=self.profile, GPU_I_ID=str(self.instance))
        return labels

    # Per-minute values; whole GPUs report utilisation in percent, MIG slices the engine-active ratio.
    def util_percent(self, minute: int) -> int:
        return (17 * self.gpu + 7 * minute) % 101

    def engine_active(self, minute: int) -> float:
        if self.profile:
            return ((13 * self.instance + 11 * minute) % 100) / 100
        return round(self.util_percent(minute) * 0.009, 4)  # exported for whole GPUs too; GPU_UTIL is used

    def fb_used_mib(self, minute: int) -> int:
        return 1024 * (1 + (self.gpu + self.instance) % 4) + 8 * (minute % 60)

    def power_watts(self, minute: int) -> float:
        if minute == NAN_MINUTE and self.node == "node-l40s" and self.gpu == 0:
            return float("nan")
        return 80.0 + 3 * ((5 * self.gpu + minute) % 100)  # a MIG slice reports its parent GPU's power

    def utilisation(self, minute: int) -> float:
        return self.engine_active(minute) if self.profile else self.util_percent(minute) / 100


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    resource: str
    devices: tuple[Device, ...]
    start: int
    stop: int | None = None  # minute it stops running (exclusive); None: runs past the data
    job: int | None = None

    def running(self, minute: int) -> bool:
        return self.start <= minute and (self.stop is None or minute < self.stop)

    def phase(self, minute: int) -> str:
        return "Pending" if minute < self.start else "Running" if self.running(minute) else "Succeeded"


H100_GPUS = [Device("node-h100", i, H100) for i in range(8)]
L40S_GPUS = [Device("node-l40s", i, L40S) for i in range(4)]
MIG_SLICES = [Device("node-a100", 0, A100, "1g.10gb", i) for i in range(1, 8)]
PODS = [
    Pod("alpha", "train-0", "nvidia_com_gpu", tuple(H100_GPUS[0:4]), start=FIRST_MINUTE, job=JOB_TRAIN),
    Pod("alpha", "eval-0", "nvidia_com_gpu", tuple(H100_GPUS[4:6]), start=15, stop=45),
    Pod("alpha", "tune-0", "nvidia_com_gpu", tuple(H100_GPUS[4:6]), start=70, stop=100),  # across the relabel
    Pod("beta", "infer-0", "nvidia_com_mig_1g_10gb", tuple(MIG_SLICES[0:3]), start=20, stop=100, job=JOB_INFER),
    Pod("beta", "viz-0", "nvidia_com_gpu", tuple(L40S_GPUS[0:2]), start=FIRST_MINUTE),
    Pod("gamma", "stray-0", "nvidia_com_gpu", tuple(L40S_GPUS[2:3]), start=FIRST_MINUTE),  # no team owns gamma
]
FLAVOR_OF = {"node-h100": "h100", "node-l40s": "l40s", "node-a100": "mig-1g"}


def minutes() -> list[int]:
    return [m for m in range(FIRST_MINUTE, HOURS * 60) if m // 60 != MISSING_HOUR]


def holder(device: Device, minute: int) -> Pod | None:
    return next((p for p in PODS if device in p.devices and p.running(minute)), None)


class Scenario:
    def __init__(self, h0: datetime):
        self.h0 = h0

    def hour(self, index: int) -> datetime:
        return self.h0 + timedelta(hours=index)

    def at(self, minute: int) -> float:
        return (self.h0 + timedelta(minutes=minute)).timestamp()

    def families(self) -> dict:
        data = minutes()
        ksm = {
            "kube_pod_status_phase": [
                ({"namespace": p.namespace, "pod": p.name, "uid": f"uid-{p.name}", "phase": phase},
                 [(self.at(m), 1.0 if p.phase(m) == phase else 0.0) for m in data])
                for p in PODS for phase in ("Pending", "Running", "Succeeded")],
            "kube_pod_container_resource_requests": [
                ({"namespace": p.namespace, "pod": p.name, "uid": f"uid-{p.name}", "container": "main",
                  "node": p.devices[0].node, "resource": resource, "unit": unit},
                 [(self.at(m), amount) for m in data])
                for p in PODS for resource, unit, amount in ((p.resource, "integer", float(len(p.devices))),
                                                             ("cpu", "core", 8.0))],
            "kube_pod_labels": [
                ({"namespace": p.namespace, "pod": p.name, "uid": f"uid-{p.name}",
                  **({"label_gpu_portal_io_job": str(p.job)} if p.job else {})}, [(self.at(m), 1.0) for m in data])
                for p in PODS],
        }
        dcgm = {
            "DCGM_FI_DEV_GPU_UTIL": lambda d, m: float(d.util_percent(m)),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": lambda d, m: d.engine_active(m),
            "DCGM_FI_DEV_FB_USED": lambda d, m: float(d.fb_used_mib(m)),
            "DCGM_FI_DEV_POWER_USAGE": lambda d, m: d.power_watts(m),
        }
        for name, value in dcgm.items():
            series: dict[tuple, list] = defaultdict(list)
            for device in H100_GPUS + L40S_GPUS + MIG_SLICES:
                if name == "DCGM_FI_DEV_GPU_UTIL" and device.profile:
                    continue  # not supported on MIG instances
                for m in data:
                    labels = device.labels(m)
                    pod = holder(device, m)
                    if pod is not None:  # pod attributes only while a pod holds the device
                        labels.update(container="main", namespace=pod.namespace, pod=pod.name)
                    series[tuple(sorted(labels.items()))].append((self.at(m), value(device, m)))
            ksm[name] = [(dict(key), samples) for key, samples in series.items()]
        return ksm

    def truth(self, index: int) -> dict[tuple[str, str], dict[str, float]]:
        """(namespace, flavor name) → allocated, used, memory (GiB, hour average), energy (kWh) of hour `index`."""
        totals: dict[tuple[str, str], dict[str, float]] = defaultdict(
            lambda: {"allocated": 0.0, "used": 0.0, "memory": 0.0, "energy": 0.0})
        for minute in range(index * 60, index * 60 + 60):
            for pod in PODS:
                if not pod.running(minute) or pod.namespace == "gamma":
                    continue
                row = totals[(pod.namespace, FLAVOR_OF[pod.devices[0].node])]
                for device in pod.devices:
                    share = float(MIG_FRACTION) if device.profile else 1.0
                    row["allocated"] += 1 / 60
                    row["used"] += device.utilisation(minute) / 60
                    row["memory"] += device.fb_used_mib(minute) / 1024 / 60
                    row["energy"] += device.power_watts(minute) * 60 / 3_600_000 * share
        return dict(totals)

    def job_truth(self, index: int) -> dict[int, dict[str, float]]:
        totals: dict[int, dict[str, float]] = defaultdict(lambda: {"allocated": 0.0, "used": 0.0})
        for minute in range(index * 60, index * 60 + 60):
            for pod in PODS:
                if pod.job and pod.running(minute):
                    totals[pod.job]["allocated"] += len(pod.devices) / 60
                    totals[pod.job]["used"] += sum(d.utilisation(minute) for d in pod.devices) / 60
        return dict(totals)


@pytest.fixture(scope="session")
def prometheus_data(tmp_path_factory):
    """(Prometheus URL, scenario): one server for the whole session, stopped at the end."""
    if prometheus.binaries() is None:
        unavailable("prometheus/promtool are not installed (Debian package 'prometheus'): the collection tests need "
                    "a real Prometheus")
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    scenario = Scenario(now - timedelta(hours=HOURS + 3))
    path = tmp_path_factory.mktemp("openmetrics") / "series.om.txt"
    prometheus.write_openmetrics(path, scenario.families())
    with prometheus.prometheus_server(path) as url:
        yield url, scenario
