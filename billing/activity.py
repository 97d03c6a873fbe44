"""What a GPU's activity means: which dcgm-exporter field tells work best, and when a GPU does none.

Measured on an NVIDIA H200 (one sample every 0.25 s through NVML and its GPM counters, the counters DCGM's profiling
fields read): a loop of one-element kernels reads 24 % on `DCGM_FI_DEV_GPU_UTIL` and on
`DCGM_FI_PROF_GR_ENGINE_ACTIVE` (both the share of *time* some kernel ran) and 0.03 % on `DCGM_FI_PROF_SM_ACTIVE` (the
share of SM cycles with a warp); 40 GiB held with no kernels reads 0 % on all three; back-to-back bf16 matmuls read
93-99 % on all three. So SM activity is the signal that means work, the other two are upper bounds on it, and memory
held is never work.

Upstream facts, at the versions of the reference notes:
- dcgm-exporter 4.5.3-4.8.2 `etc/default-counters.csv` exports GPU_UTIL, GR_ENGINE_ACTIVE and PIPE_TENSOR_ACTIVE and
  leaves SM_ACTIVE and SM_OCCUPANCY commented out; GPU_UTIL is not reported for MIG instances, the profiling fields
  are (ratios 0-1; GPU_UTIL is a percentage).
- A counters file given to the exporter (`-f` / `DCGM_EXPORTER_COLLECTORS`) replaces the default set (pkg/cmd/app.go).
- GPU Operator v26.7.0: the ClusterPolicy's `dcgmExporter.config.name` names a ConfigMap in the operator's namespace
  whose key `dcgm-metrics.csv` is mounted at `/etc/dcgm-exporter/dcgm-metrics.csv` and passed as
  DCGM_EXPORTER_COLLECTORS (controllers/object_controls.go); the chart makes that ConfigMap from
  `dcgmExporter.config.create` and `.data` (deployments/gpu-operator/templates/dcgm_exporter_config.yaml).

No database, no settings: callers pass the threshold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .choices import UtilisationSignal

SM_ACTIVE = UtilisationSignal.SM_ACTIVE.value
GR_ENGINE_ACTIVE = UtilisationSignal.GR_ENGINE_ACTIVE.value
GPU_UTIL = UtilisationSignal.GPU_UTIL.value
SIGNALS = (SM_ACTIVE, GR_ENGINE_ACTIVE, GPU_UTIL)  # best first
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
# Every activity field the collector looks for in an hour's series.
FIELDS = (*SIGNALS, TENSOR_ACTIVE)
PERCENT = frozenset({GPU_UTIL})  # reported 0-100; the others 0-1
# Memory per GPU below which "holds memory" is not worth saying: the probe's process held 1.5 GiB with nothing
# allocated (its CUDA context and PyTorch's), 41.5 GiB with a model's worth.
MEMORY_HELD_GIB = 2.0
# Tensor-pipe activity under this, while the SMs are busy, is work that uses no tensor cores.
NO_TENSOR = 0.01

TINY_KERNELS = ("time-based signal: a loop of tiny kernels (a polling loop, a starved input pipeline) reads busy "
                "while its SMs do nothing; only SM activity tells them apart")


def best_signal(exported: Iterable[str]) -> str:
    """The best of the signals the exporter provides ('' when it provides none)."""
    exported = set(exported)
    return next((signal for signal in SIGNALS if signal in exported), "")


def time_based(signal: str) -> bool:
    """Whether `signal` counts time some kernel ran, so tiny kernels read as work ('' is unknown: say so too)."""
    return signal != SM_ACTIVE


def signal_label(signal: str) -> str:
    return UtilisationSignal(signal).label if signal else "an unrecorded signal"


@dataclass(frozen=True)
class Verdict:
    """Whether GPUs did work, in a sentence, and what the signal cannot tell (empty when it can tell)."""

    idle: bool
    reason: str
    caveat: str = ""


def judge_idle(*, signal: str, utilisation: float, threshold: float, memory_gib: float = 0.0) -> Verdict:
    """Idle means no work: activity (0..1, on `signal`) under `threshold`, whatever memory (GiB per GPU) is held.

    A time-based signal can only overstate work, so when it reads idle the GPU was idle; when it reads busy, the
    verdict says that tiny kernels could be all there is.
    """
    reading = f"{signal_label(signal)} {100 * utilisation:.1f} %"
    if utilisation < threshold:
        if memory_gib >= MEMORY_HELD_GIB:
            return Verdict(True, f"holds {memory_gib:.1f} GiB of memory per GPU but does no work ({reading})")
        return Verdict(True, f"does no work ({reading})")
    return Verdict(False, f"busy ({reading})", TINY_KERNELS if time_based(signal) else "")


def tensor_note(*, sm_active: float | None, tensor_active: float | None, threshold: float) -> str:
    """What SM and tensor-pipe activity say together; '' when either is not exported or there is nothing to say."""
    if sm_active is None or tensor_active is None or sm_active < threshold:
        return ""
    return "busy, but no tensor cores used" if tensor_active < NO_TENSOR else ""


# --- turning SM activity on -----------------------------------------------------------------------------------

# The exporter's own lines for the two SM fields, uncommented (etc/default-counters.csv, 4.5.3-4.8.2).
SM_ACTIVITY_LINES = (
    "DCGM_FI_PROF_SM_ACTIVE,          gauge, The ratio of cycles an SM has at least 1 warp assigned.",
    "DCGM_FI_PROF_SM_OCCUPANCY,       gauge, The ratio of number of warps resident on an SM.",
)
# The lines of every other field the portal reads, as that file has them: a counters file replaces the default
# set, so a file with only the SM lines would stop the collection of these.
PORTAL_LINES = (
    "DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).",
    "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_POWER_USAGE,              gauge, Power draw (in W).",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE,   gauge, Ratio of time the graphics engine is active.",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.",
)
CONFIGMAP_NAME, CONFIGMAP_KEY = "dcgm-exporter-metrics", "dcgm-metrics.csv"


def _indented(lines: Iterable[str], spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in lines)


def exporter_config(namespace: str = "gpu-operator") -> dict[str, str]:
    """How to turn SM activity on: the CSV lines, a ConfigMap holding them with the portal's other fields, and the
    GPU Operator chart values that make and mount that ConfigMap."""
    lines = (*PORTAL_LINES, *SM_ACTIVITY_LINES)
    configmap = (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {CONFIGMAP_NAME}\n  namespace: {namespace}\n"
                 f"data:\n  {CONFIGMAP_KEY}: |\n{_indented(lines, 4)}\n")
    values = (f"dcgmExporter:\n  config:\n    name: {CONFIGMAP_NAME}\n    create: true\n    data: |-\n"
              f"{_indented(lines, 6)}\n")
    return {"lines": "\n".join(SM_ACTIVITY_LINES), "configmap": configmap, "operator_values": values,
            "configmap_name": CONFIGMAP_NAME, "configmap_key": CONFIGMAP_KEY}
