"""Usage of a sandbox cluster: deterministic series derived from its pods (the portal's gateway lists them), for
the embedded default cluster and the demo, answering `hour_usage(hour)` as `metrics.PrometheusSource` does."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from portal import kube
from portal.naming import managed_selector

from . import devices
from .metrics import HOUR, JOB_LABEL, Capacity, HourUsage, MetricsError, Usage, check_hour, ksm_resource

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
