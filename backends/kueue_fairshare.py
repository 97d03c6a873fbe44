"""Kueue's admission fair sharing: each LocalQueue's usage decayed with a half-life, and the order it gives the
LocalQueues of one ClusterQueue. Pure arithmetic: no database, no clock.

Written from kubernetes-sigs/kueue (the release in `portal.upstream`):
- apis/config/v1beta2/configuration_types.go and defaults.go: the Configuration's `admissionFairSharing` holds
  `usageHalfLifeTime` (no default: 0), `usageSamplingInterval` (defaults to 5 minutes) and `resourceWeights`
  (a resource not named weighs 1); pkg/config/validation.go refuses a negative half-life or weight and a sampling
  interval that is not positive. Without the block the feature is off.
- pkg/controller/core/localqueue_controller.go (reconcileConsumedUsage): every sampling interval the LocalQueue's
  `status.fairSharing.admissionFairSharingStatus.consumedResources` becomes old × (1 − α) + admitted × α, with
  α = 1 − 0.5^(elapsed ÷ half-life) (pkg/util/admissionfairsharing, CalculateDecayedConsumed), and `lastUpdate`
  the sampling time. With a half-life of 0 the consumed resources are reset to nothing at every sample, so every
  queue counts as unused and the order is the ClusterQueue's own: the feature is silently off.
- pkg/util/admissionfairsharing (CalculateUsage) and pkg/cache/queue/cluster_queue.go (queueOrderingFunc): a
  queue's usage is Σ resource weight × consumed, divided by the LocalQueue's `spec.fairSharing.weight` (1 when
  unset; a weight of 0 makes it infinite, last). In a ClusterQueue with `admissionScope.admissionMode:
  UsageBasedAdmissionFairSharing` the lower usage goes first, then the ClusterQueue's own order (priority, then
  creation). An admission adds an entry penalty of requests × α(sampling interval) until the next sample.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from portal.kube import quantity_float

DEFAULT_SAMPLING_SECONDS = 300.0
DEFAULT_HALF_LIFE_SECONDS = 0.0
USAGE_BASED = "UsageBasedAdmissionFairSharing"

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds of a Go duration as metav1.Duration writes it ("168h", "1h30m", "5m0s", "0s"); ValueError else."""
    text = str(text).strip()
    if text in ("0", ""):
        return 0.0
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    parts = _DURATION.findall(body)
    if not parts or "".join(number + unit for number, unit in parts) != body:
        raise ValueError(f"not a duration: {text!r} (write e.g. 168h, 90m or 1h30m)")
    return sign * sum(float(number) * _UNITS[unit] for number, unit in parts)


def format_duration(seconds: float) -> str:
    """A duration as Kueue's Configuration takes it, in whole hours, minutes and seconds."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"


@dataclass(frozen=True)
class Settings:
    """The Configuration's `admissionFairSharing`, in seconds."""

    half_life: float = DEFAULT_HALF_LIFE_SECONDS
    sampling: float = DEFAULT_SAMPLING_SECONDS
    resource_weights: Mapping[str, float] = field(default_factory=dict)

    @property
    def decays(self) -> bool:
        """Whether usage is remembered at all: a half-life of 0 resets it at every sample."""
        return self.half_life > 0

    def problems(self) -> list[str]:
        """What Kueue's configuration validation refuses (pkg/config/validation.go)."""
        found = []
        if self.half_life < 0:
            found.append("usageHalfLifeTime must not be negative")
        if self.sampling <= 0:
            found.append("usageSamplingInterval must be greater than 0")
        found += [f"resourceWeights[{name}] must not be negative"
                  for name, weight in sorted(self.resource_weights.items()) if weight < 0]
        return found


def settings_from(configuration: Mapping | None) -> Settings | None:
    """The settings of a Kueue Configuration (as loaded from its YAML), None when it has no `admissionFairSharing`
    (the feature is off); ValueError for durations or weights Kueue would refuse."""
    block = (configuration or {}).get("admissionFairSharing") if isinstance(configuration, Mapping) else None
    if not isinstance(block, Mapping):
        return None
    sampling = parse_duration(block["usageSamplingInterval"]) if block.get("usageSamplingInterval") else 0.0
    weights = {str(name): float(value) for name, value in (block.get("resourceWeights") or {}).items()}
    settings = Settings(half_life=parse_duration(block.get("usageHalfLifeTime") or "0"),
                        sampling=sampling or DEFAULT_SAMPLING_SECONDS, resource_weights=weights)
    if settings.problems():
        raise ValueError("; ".join(settings.problems()))
    return settings


def alpha(elapsed: float, half_life: float) -> float:
    """The weight of the newest sample (calculateAlphaRate): 0 when nothing decays."""
    if half_life == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed / half_life)


def sample(consumed: Mapping[str, float], admitted: Mapping[str, float], elapsed: float,
           half_life: float) -> dict[str, float]:
    """A queue's consumed resources after one sample of what it has admitted now."""
    if half_life == 0:
        return {}
    rate = alpha(elapsed, half_life)
    names = sorted(set(consumed) | set(admitted))
    return {name: consumed.get(name, 0.0) * (1 - rate) + admitted.get(name, 0.0) * rate for name in names}


def entry_penalty(requests: Mapping[str, float], settings: Settings) -> dict[str, float]:
    """What an admission adds to its queue's usage until the next sample (CalculateEntryPenalty)."""
    rate = alpha(settings.sampling, settings.half_life)
    return {name: value * rate for name, value in requests.items()}


def usage(consumed: Mapping[str, float], weight: float, resource_weights: Mapping[str, float] | None = None,
          penalty: Mapping[str, float] | None = None) -> float:
    """The number a queue is ordered by: Σ resource weight × (consumed + penalty) ÷ the queue's weight."""
    weights, penalty = resource_weights or {}, penalty or {}
    total = sum(weights.get(name, 1.0) * (consumed.get(name, 0.0) + penalty.get(name, 0.0))
                for name in sorted(set(consumed) | set(penalty)))
    if weight <= 0:
        return math.inf
    return total / weight


def order(usages: Mapping[str, float]) -> list[str]:
    """Queues in the order their heads are tried: lower usage first; equal usage keeps the ClusterQueue's order
    (priority, then creation), here by name."""
    return sorted(usages, key=lambda name: (usages[name], name))


# --- replaying recorded usage ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replayed:
    """A replay's outcome per queue: consumed resources at the end, the usage it is ordered by, its share of all
    queues' usage, and the series of ordering usage at each hour's end (for a chart)."""

    consumed: dict[str, dict[str, float]]
    usage: dict[str, float]
    share: dict[str, float]
    order: list[str]
    series: dict[str, list[tuple[float, float]]]


def replay(hours: Mapping[str, Mapping[float, Mapping[str, float]]], weights: Mapping[str, float],
           settings: Settings, *, start: float, end: float,
           initial: Mapping[str, Mapping[str, float]] | None = None) -> Replayed:
    """Sample every queue as Kueue's LocalQueue controller does, once per sampling interval at `start`,
    `start` + interval, … before `end` (epoch seconds), each sample reading what the queue holds at that moment:
    `hours[queue][hour start]` is the average it held per resource during that hour (a recorded usage row), nothing
    for an hour not recorded. `initial` is what each queue had consumed an interval before `start`.

    What a queue holds is the same for every sample within an hour, so the n samples of an hour are taken at once:
    c ← held + (c − held) × (1 − α)^n, the same figure as n single samples. The series has each queue's usage at
    the last sample of every hour."""
    interval = settings.sampling
    steps = math.ceil((end - start) / interval - 1e-9) - 1  # the last sample's index
    consumed = {queue: dict((initial or {}).get(queue, {})) for queue in sorted(set(hours) | set(weights))}
    series: dict[str, list[tuple[float, float]]] = {queue: [] for queue in consumed}
    keep = 1 - alpha(interval, settings.half_life)
    first = 0
    while first <= steps:
        hour = math.floor((start + first * interval) / 3600) * 3600
        last = min(steps, math.ceil((hour + 3600 - start) / interval - 1e-9) - 1)
        count = last - first + 1
        for queue in consumed:
            held = (hours.get(queue) or {}).get(hour, {})
            if not settings.decays:
                consumed[queue] = {}
                continue
            factor = keep ** count
            consumed[queue] = {name: held.get(name, 0.0) + (consumed[queue].get(name, 0.0) - held.get(name, 0.0))
                               * factor for name in sorted(set(consumed[queue]) | set(held))}
        for queue in consumed:
            series[queue].append((start + last * interval, usage(consumed[queue], weights.get(queue, 1.0),
                                                                 settings.resource_weights)))
        first = last + 1
    usages = {queue: usage(consumed[queue], weights.get(queue, 1.0), settings.resource_weights)
              for queue in consumed}
    return Replayed(consumed=consumed, usage=usages, share=shares(usages), order=order(usages), series=series)


def shares(usages: Mapping[str, float]) -> dict[str, float]:
    """Each queue's part of the finite usage of all (0 for all when there is none)."""
    finite = {name: value for name, value in usages.items() if math.isfinite(value)}
    total = sum(finite.values())
    return {name: (finite.get(name, 0.0) / total if total > 0 else 0.0) for name in usages}


def consumed_from_status(local_queue: Mapping) -> tuple[dict[str, float], str] | None:
    """A LocalQueue's `status.fairSharing.admissionFairSharingStatus`: (consumed resources, lastUpdate); None when
    Kueue has not written it (the feature is off)."""
    status = (((local_queue.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus"))
    if not isinstance(status, Mapping):
        return None
    consumed = {name: quantity_float(value) for name, value in (status.get("consumedResources") or {}).items()}
    return consumed, str(status.get("lastUpdate") or "")


OFF, UNKNOWN, NO_HALF_LIFE, ON = "off", "unknown", "no-half-life", "on"


def cluster_state(observations: Iterable[tuple[Mapping | None, int]]) -> str:
    """Whether a cluster's Kueue runs admission fair sharing, from each team's LocalQueue status as recorded
    (None: Kueue wrote none) and the GPUs its ClusterQueue holds now. Kueue writes the status only when its
    Configuration has `admissionFairSharing` (OFF without); with a half-life of 0 it empties the consumed resources
    at every sample, so a queue holding GPUs with nothing consumed tells that the feature is silently off
    (NO_HALF_LIFE); with nothing held anywhere it cannot be told yet (UNKNOWN)."""
    seen = [(decayed, held) for decayed, held in observations if decayed is not None]
    if not seen:
        return OFF
    if any(decayed.get("consumed") for decayed, _ in seen):
        return ON
    return NO_HALF_LIFE if any(held > 0 for _, held in seen) else UNKNOWN


def weight_of(local_queue: Mapping) -> float:
    """A LocalQueue's `spec.fairSharing.weight` (LQWeightAsFloat64): 1 when unset."""
    value = ((local_queue.get("spec") or {}).get("fairSharing") or {}).get("weight")
    if value is None:
        return 1.0
    return quantity_float(value)


def by_queue(rows: Iterable[tuple[str, float, str, float]]) -> dict[str, dict[float, dict[str, float]]]:
    """(queue, hour start, resource, units held on average) rows as `replay` takes them."""
    hours: dict[str, dict[float, dict[str, float]]] = {}
    for queue, hour, resource, units in rows:
        held = hours.setdefault(queue, {}).setdefault(hour, {})
        held[resource] = held.get(resource, 0.0) + units
    return hours
