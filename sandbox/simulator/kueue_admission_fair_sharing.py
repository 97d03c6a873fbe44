"""Kueue's admission fair sharing: LocalQueues' usage decayed with a half-life, ordering the workloads of a
ClusterQueue whose `admissionScope.admissionMode` is `UsageBasedAdmissionFairSharing`.

A port of kubernetes-sigs/kueue:
- Configuration `admissionFairSharing` (apis/config/v1beta2/configuration_types.go, defaults.go): no block, no
  feature; `usageSamplingInterval` defaults to 5 minutes, `usageHalfLifeTime` to 0, a resource not named in
  `resourceWeights` weighs 1. Read from the ConfigMap Kueue's manifests mount (`dra.KUEUE_CONFIG`).
- pkg/controller/core/localqueue_controller.go (Reconcile, initializeAfsIfNeeded, reconcileConsumedUsage): a
  LocalQueue seen first is seeded from its status with `lastUpdate` now; then, once a sampling interval has passed
  (or at once when an entry penalty waits), its consumed resources become old × (1 − α) + admitted × α,
  α = 1 − 0.5^(elapsed ÷ half-life), written to `status.fairSharing.admissionFairSharingStatus` with `lastUpdate`;
  a half-life of 0 resets them to nothing. Products are rounded down to 9 decimals (pkg/util/resource MulByFloat).
  A stopped LocalQueue is not sampled; `weightedShare` is left at the 0 the controller starts from.
- pkg/util/admissionfairsharing (CalculateUsage, CalculateEntryPenalty) and pkg/cache/queue/cluster_queue.go
  (queueOrderingFunc): usage is Σ resource weight × (consumed + entry penalties) ÷ `spec.fairSharing.weight`
  (1 when unset, infinite for 0); lower usage first, then the ClusterQueue's order. An admission adds requests ×
  α(sampling interval) as the queue's entry penalty, folded into the next sample (pkg/scheduler/scheduler.go).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from decimal import ROUND_DOWN, Decimal

import yaml

from ..quantity import parse_quantity
from .dra import KUEUE_CONFIG
from .model import KUEUE, iso

USAGE_BASED = "UsageBasedAdmissionFairSharing"
SCALE = Decimal("1e-9")
_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ns|us|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def _duration(text) -> float:
    text = str(text or "0").strip()
    parts = _DURATION.findall(text)
    if text in ("0", "") or not parts:
        return 0.0
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)


def configuration(objects) -> dict | None:
    """(half-life, sampling interval, resource weights) of the Kueue Configuration, None when it has none."""
    namespace, name, key = KUEUE_CONFIG
    config_map = objects.get("v1", "ConfigMap", namespace, name)
    try:
        loaded = yaml.safe_load(((config_map or {}).get("data") or {}).get(key) or "") or {}
    except yaml.YAMLError:
        return None
    block = loaded.get("admissionFairSharing") if isinstance(loaded, dict) else None
    if not isinstance(block, dict):
        return None
    return {"half_life": _duration(block.get("usageHalfLifeTime")),
            "sampling": _duration(block.get("usageSamplingInterval")) or 300.0,
            "weights": {str(k): float(v) for k, v in (block.get("resourceWeights") or {}).items()}}


def alpha(elapsed: float, half_life: float) -> Decimal:
    if half_life == 0:
        return Decimal(0)
    return Decimal(repr(1.0 - math.pow(0.5, elapsed / half_life)))


def _times(values: dict[str, Decimal], factor: Decimal) -> dict[str, Decimal]:
    return {name: (value * factor).quantize(SCALE, rounding=ROUND_DOWN) for name, value in values.items()}


def _sum(*parts: dict[str, Decimal]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = defaultdict(Decimal)
    for part in parts:
        for name, value in part.items():
            total[name] += value
    return dict(total)


def quantity(value: Decimal) -> str:
    """A decimal quantity in Kubernetes' canonical form at nano precision."""
    value = value.quantize(SCALE, rounding=ROUND_DOWN)
    for suffix, scale in (("", 1), ("m", 1000), ("u", 10**6), ("n", 10**9)):
        scaled = value * scale
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    return format(value, "f")


def weight(lq_spec: dict) -> float:
    value = (lq_spec.get("fairSharing") or {}).get("weight")
    return 1.0 if value is None else float(parse_quantity(str(value)))


class Ledger:
    """The queue manager's usage ledger: per LocalQueue (namespace, name), consumed resources, when they were
    last sampled, and the entry penalties not yet folded in."""

    def __init__(self):
        self.consumed: dict[tuple[str, str], dict[str, Decimal]] = {}
        self.last: dict[tuple[str, str], float] = {}
        self.penalty: dict[tuple[str, str], dict[str, Decimal]] = defaultdict(dict)

    def usage(self, key: tuple[str, str], lq_weight: float, weights: dict[str, float]) -> float:
        total = _sum(self.consumed.get(key, {}), self.penalty.get(key, {}))
        value = sum(weights.get(name, 1.0) * float(total[name]) for name in sorted(total))
        return math.inf if lq_weight <= 0 else value / lq_weight

    def admit(self, key: tuple[str, str], requests: dict[str, Decimal], config: dict) -> None:
        self.penalty[key] = _sum(self.penalty.get(key, {}), _times(requests, alpha(config["sampling"],
                                                                                   config["half_life"])))

    def sample(self, objects, admitted: dict[tuple[str, str], dict[str, Decimal]], config: dict,
               now: float) -> None:
        """Each active LocalQueue whose sampling interval has passed (or that has a penalty waiting) sampled, its
        status written."""
        for lq in objects.list(KUEUE, "LocalQueue"):
            spec = lq.get("spec") or {}
            if spec.get("stopPolicy", "None") != "None":
                continue
            key = (lq["metadata"]["namespace"], lq["metadata"]["name"])
            seen = key in self.last
            if not seen:
                status = ((lq.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
                self.consumed[key] = {name: parse_quantity(str(value))
                                      for name, value in (status.get("consumedResources") or {}).items()}
                self.last[key] = now
            elapsed = max(0.0, now - self.last[key])
            if seen and elapsed < config["sampling"] and not self.penalty.get(key):
                continue
            if config["half_life"] == 0:
                consumed = {}
            else:
                rate = alpha(elapsed, config["half_life"])
                consumed = _sum(_times(self.consumed.get(key, {}), 1 - rate), _times(admitted.get(key, {}), rate))
            self.consumed[key], self.last[key] = consumed, now
            self.penalty.pop(key, None)
            # The controller starts from an empty LocalQueueFairSharingStatus: weightedShare (required) is 0.
            objects.patch_status(KUEUE, "LocalQueue", key[0], key[1], {"fairSharing": {"weightedShare": 0,
                "admissionFairSharingStatus": {"consumedResources": {n: quantity(v) for n, v in sorted(
                    consumed.items())}, "lastUpdate": iso(now)}}})


def admitted_by_queue(admitted: dict[str, dict], requests) -> dict[tuple[str, str], dict[str, Decimal]]:
    """What each LocalQueue's admitted workloads request, per resource name (all flavors together)."""
    totals: dict[tuple[str, str], dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for jobs in admitted.values():
        for job in jobs.values():
            for (_, resource), value in requests(job).items():
                totals[(job.namespace, job.queue)][resource] += value
    return totals


def reorder(jobs: list, config: dict, ledger: Ledger, settings: dict | None) -> list:
    """The workloads of each ClusterQueue using admission fair sharing put in its LocalQueues' usage order, in the
    places that ClusterQueue's workloads held (the order across ClusterQueues, and within each by priority and
    creation for equal usage, stays)."""
    if settings is None:
        return jobs
    slots: dict[str, list[int]] = defaultdict(list)
    for index, job in enumerate(jobs):
        lq = config["lq"].get((job.namespace, job.queue))
        cq = config["cq"].get((lq or {}).get("clusterQueue", ""))
        if cq is not None and cq.get("admission_mode") == USAGE_BASED:
            slots[lq["clusterQueue"]].append(index)
    ordered = list(jobs)
    for indexes in slots.values():
        members = [jobs[i] for i in indexes]
        members.sort(key=lambda job: ledger.usage((job.namespace, job.queue),
                                                  weight(config["lq"][(job.namespace, job.queue)]),
                                                  settings["weights"]))
        for index, job in zip(indexes, members, strict=True):
            ordered[index] = job
    return ordered
