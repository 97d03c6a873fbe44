"""What a job's pods ask for in CPU and memory, as its scheduler counts them against the team's quota: every
worker's request, and for a Ray job also its head (the workers' size, without GPUs: `manifests.ray_job_manifest`)
and KubeRay's submitter Job. Pure: numbers in, numbers and words out.

The submitter: in K8sJobMode (the RayJob's default) KubeRay runs the entrypoint from a Job of its own whose container
asks for 500m CPU and 200Mi memory (ray-operator/controllers/ray/common/job.go, GetDefaultSubmitterContainer).
Kueue counts it as a pod set of its own since v0.19 (pkg/controller/jobs/rayjob/rayjob_controller.go,
addSubmitterPodSet; kubernetes-sigs/kueue#12405, #12454), and KubeRay's Volcano plugin adds it to the PodGroup's
minResources (ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go). So a Ray job whose head and
workers fill the team's CPU quota exactly never starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from .choices import JobKind

SUBMITTER_CPU = Decimal("0.5")
SUBMITTER_MEMORY_GIB = Decimal(200) / 1024
# The scheduler's words when CPU or memory, not the flavor's GPUs, is what the quota lacks: Kueue's "insufficient
# (unused) quota for cpu in flavor …" (pkg/scheduler/flavorassigner), Volcano's "insufficient cpu" (proportion and
# capacity plugins' enqueue refusal).
SHORT_OF = re.compile(r"insufficient (?:unused )?(?:quota for )?(cpu|memory)\b")


@dataclass(frozen=True)
class PodTotals:
    cpu: Decimal
    memory_gib: Decimal
    parts: str  # what the pods are, for a sentence: "1 worker", "a Ray head, 2 workers and KubeRay's submitter"


def pod_totals(*, kind: str, workers: int, cpu_per_worker: int, memory_gib_per_worker: int) -> PodTotals:
    pods = workers + (1 if kind == JobKind.RAY else 0)
    cpu, memory = Decimal(pods * cpu_per_worker), Decimal(pods * memory_gib_per_worker)
    named = f"{workers} worker{'' if workers == 1 else 's'}"
    if kind != JobKind.RAY:
        return PodTotals(cpu, memory, named)
    return PodTotals(cpu + SUBMITTER_CPU, memory + SUBMITTER_MEMORY_GIB,
                     f"a Ray head, {named} and KubeRay's submitter of {SUBMITTER_CPU} CPU and 200Mi")


def number(value: Decimal) -> str:
    """8, 8.5, 64.2: at most one decimal, no trailing zero."""
    text = f"{value.quantize(Decimal('0.1')):f}"
    return text.removesuffix(".0")


def short_of(message: str) -> str:
    """'cpu' or 'memory' when the scheduler's words say that is what the quota lacks; '' otherwise."""
    found = SHORT_OF.search(message or "")
    return found.group(1) if found else ""
