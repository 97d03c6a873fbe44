"""The H200 probe's samples (GPU_PROBE_DIR/h200-samples.csv: every 0.25 s, six phases of load on one GPU) rendered
as the dcgm-exporter series of one node, under either scrape setup, for a real Prometheus.

Each phase becomes one pod's GPU for four hours, its samples replayed in order, one per dcgm-exporter scrape (every
15 s, four a minute), so an hour holds 240 of them. The CSV's columns map to the exporter's fields as the probe's
README says: util_gpu → DCGM_FI_DEV_GPU_UTIL (%), graphics_util → DCGM_FI_PROF_GR_ENGINE_ACTIVE, sm_util →
DCGM_FI_PROF_SM_ACTIVE, sm_occupancy → DCGM_FI_PROF_SM_OCCUPANCY (ratios, the CSV has percent), mem_used_mib →
DCGM_FI_DEV_FB_USED, power_w → DCGM_FI_DEV_POWER_USAGE. Which fields the exporter reports changes by the hour, as a
platform turning the profiling fields on would (FIELDS_BY_HOUR): GPU_UTIL alone, then the default counters, then SM
activity added at minute 20 of the third hour, then SM activity all hour.
"""

from __future__ import annotations

import csv
import os
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from tests.billing.conftest import DCGM_OFFSETS, KSM_OFFSETS, exporter_target, stored_labels
from tests.requires import unavailable

H200 = "NVIDIA H200"
NODE = "node-h200"
NAMESPACE = "alpha"
PHASES = ("idle", "memory_held_idle", "tiny_kernels", "heavy_10pct_duty", "heavy_full")
JOB_OF = {phase: 7100 + i for i, phase in enumerate(PHASES)}
HOURS = 4  # per scrape setup
SHAPES = ("direct", "exported")
SM_FROM_MINUTE = 2 * 60 + 20  # the exporter's ConfigMap gains SM activity here (third hour, minute 20)
GPU_UTIL, GR_ENGINE, SM_ACTIVE, SM_OCCUPANCY = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                                                 "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY")
COLUMN = {GPU_UTIL: "util_gpu", GR_ENGINE: "graphics_util", SM_ACTIVE: "sm_util", SM_OCCUPANCY: "sm_occupancy"}
# The signal each hour is read from: SM activity counts from the first hour it covers whole.
SIGNAL_BY_HOUR = (GPU_UTIL, GR_ENGINE, GR_ENGINE, SM_ACTIVE)


def samples_path() -> Path:
    folder = os.environ.get("GPU_PROBE_DIR", "")
    path = Path(folder) / "h200-samples.csv"
    if not folder or not path.is_file():
        unavailable(f"GPU_PROBE_DIR={folder!r} holds no h200-samples.csv: the signal tests replay it",
                    flag="REQUIRE_GPU_PROBE")
    return path


def read_phases(path: Path) -> dict[str, list[dict[str, float]]]:
    phases: dict[str, list[dict[str, float]]] = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            phases[row.pop("phase")].append({k: float(v) for k, v in row.items() if v != ""})
    return dict(phases)


def exported_fields(minute: int) -> tuple[str, ...]:
    """The activity fields the exporter reports at a minute of the four hours."""
    hour = minute // 60
    fields = [GPU_UTIL]
    if hour >= 1:
        fields.append(GR_ENGINE)  # the default counters: graphics engine activity, SM activity commented out
    if minute >= SM_FROM_MINUTE:
        fields += [SM_ACTIVE, SM_OCCUPANCY]
    return tuple(fields)


@dataclass
class H200Scenario:
    base: datetime  # the first hour; each scrape setup takes HOURS hours from base + HOURS × its index
    phases: dict[str, list[dict[str, float]]]

    def hour(self, index: int, shape: int = 0) -> datetime:
        return self.base + timedelta(hours=HOURS * shape + index)

    def sample(self, phase: str, minute: int, k: int) -> dict[str, float]:
        rows = self.phases[phase]
        return rows[(4 * minute + k) % len(rows)]

    @staticmethod
    def value(field: str, sample: dict[str, float]) -> float:
        return sample[COLUMN[field]] if field == GPU_UTIL else sample[COLUMN[field]] / 100

    def at(self, shape: int, minute: int, seconds: float) -> float:
        return (self.hour(0, shape) + timedelta(minutes=minute, seconds=seconds)).timestamp()

    def families(self) -> dict:
        families: dict[str, list] = defaultdict(list)
        for shape_index, shape in enumerate(SHAPES):
            minutes = range(HOURS * 60)
            for gpu, phase in enumerate(PHASES):
                pod, uid = f"{phase.replace('_', '-')}-0", f"uid-{phase}"
                ksm = {"job": "kube-state-metrics", "instance": "10.0.0.5:8080", "namespace": NAMESPACE, "pod": pod,
                       "uid": uid}
                times = [self.at(shape_index, m, s) for m in minutes for s in KSM_OFFSETS]
                families["kube_pod_status_phase"].append(({**ksm, "phase": "Running"}, [(t, 1.0) for t in times]))
                families["kube_pod_container_resource_requests"].append(
                    ({**ksm, "container": "main", "node": NODE, "resource": "nvidia_com_gpu", "unit": "integer"},
                     [(t, 1.0) for t in times]))
                families["kube_pod_labels"].append(
                    ({**ksm, "label_gpu_portal_io_job": str(JOB_OF[phase])}, [(t, 1.0) for t in times]))
                own = {"gpu": str(gpu), "UUID": f"GPU-h200-{gpu}", "pci_bus_id": f"00000000:{gpu:02d}:00.0",
                       "device": f"nvidia{gpu}", "modelName": H200, "Hostname": NODE,
                       "DCGM_FI_DRIVER_VERSION": "580.159.04", "pod": pod, "namespace": NAMESPACE,
                       "container": "main"}
                target = {**exporter_target("node-h100"), "pod": "nvidia-dcgm-exporter-h200",
                          "instance": "10.0.1.9:9400"}
                labels = stored_labels(own, target, shape)
                series: dict[str, list] = defaultdict(list)
                for m in minutes:
                    for k, s in enumerate(DCGM_OFFSETS):
                        sample, t = self.sample(phase, m, k), self.at(shape_index, m, s)
                        for field in exported_fields(m):
                            series[field].append((t, self.value(field, sample)))
                        series["DCGM_FI_DEV_FB_USED"].append((t, sample["mem_used_mib"]))
                        series["DCGM_FI_DEV_POWER_USAGE"].append((t, sample["power_w"]))
                for name, samples in series.items():
                    families[name].append((labels, samples))
        return families

    def used_truth(self, phase: str, index: int, field: str) -> float:
        """GPU-hours weighted by `field` in hour `index`: the plain mean of the hour's 240 samples (one GPU)."""
        values = [self.value(field, self.sample(phase, m, k)) for m in range(60 * index, 60 * index + 60)
                  for k in range(4)]
        return sum(values) / len(values) / (100 if field == GPU_UTIL else 1)

    def memory_truth(self, phase: str, index: int) -> float:
        values = [self.sample(phase, m, k)["mem_used_mib"] for m in range(60 * index, 60 * index + 60)
                  for k in range(4)]
        return sum(values) / len(values) / 1024
