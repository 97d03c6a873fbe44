"""Usage of a sandbox cluster: deterministic series derived from its pods (the portal's gateway lists them), for
the embedded default cluster and the demo, answering `hour_usage(hour)`, `activity_now(now)` and `job_gpus(...)`
as billing's `metrics.PrometheusSource` does. A sandbox has no exporters, so the demo's wiring plugs this source
into billing (billing.sources.register, from `composition.demo.plug_in`) for sandbox clusters without a Prometheus
URL.

It reports the activity fields a dcgm-exporter with SM activity turned on reports (activity.FIELDS) unless told
fewer, and reads "used" from the best of them, as the collector does. A job sets what its GPUs do with the
environment variable SANDBOX_GPU_ACTIVITY on its containers, or a pod at any time with the annotation
ACTIVITY_ANNOTATION (ACTIVITIES: busy, busy-no-tensor, tiny-kernels, idle-memory-held, idle); without either, a
pod works or idles by a hash of its name and the hour.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from billing import activity, devices, gpus, nodes
from billing.gpus import JobGpus
from billing.live_activity import PodReading
from billing.metrics import HOUR, JOB_LABEL, Capacity, HourUsage, MetricsError, Usage, check_hour, ksm_resource
from portal import kube
from portal.naming import managed_selector
from tenants.choices import Connection

GPU_PREFIX = "nvidia.com/"
ACTIVITY_ENV = "SANDBOX_GPU_ACTIVITY"
# Set on a running pod (kubectl annotate), it changes what the pod's GPUs do from then on: a test or the demo lets
# a workspace go idle or get busy again.
ACTIVITY_ANNOTATION = "sandbox.gpu-portal.io/gpu-activity"


@dataclass(frozen=True)
class Activity:
    """What each activity field reads (0..1) on a GPU doing one kind of thing, and the memory it holds (GiB; None
    for a share of the unit's memory that grows with the work)."""

    gpu_util: float
    gr_engine_active: float
    sm_active: float
    tensor_active: float
    memory_gib: float | None = None

    def reading(self, field: str) -> float:
        return {activity.GPU_UTIL: self.gpu_util, activity.GR_ENGINE_ACTIVE: self.gr_engine_active,
                activity.SM_ACTIVE: self.sm_active, activity.TENSOR_ACTIVE: self.tensor_active}.get(field, 0.0)


# The means per phase measured on an NVIDIA H200 (the GPU probe's summary): bf16 matmuls back to back, a loop of
# one-element kernels, 40 GiB held with no kernels. Tensor-pipe activity was not measured there; matmuls in bf16
# keep the tensor pipe busy, taken as 0.8, and "busy-no-tensor" is the same work done without tensor cores.
ACTIVITIES = {
    "busy": Activity(0.9887, 0.9705, 0.9329, 0.8, memory_gib=1.7),
    "busy-no-tensor": Activity(0.9887, 0.9705, 0.9329, 0.0, memory_gib=1.7),
    "tiny-kernels": Activity(0.2383, 0.2364, 0.0003, 0.0, memory_gib=1.5),
    "idle-memory-held": Activity(0.0004, 0.0001, 0.0, 0.0, memory_gib=41.5),
    "idle": Activity(0.0, 0.0, 0.0, 0.0, memory_gib=0.5),
}


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


def pod_activity(run: PodRun, hour: datetime) -> Activity:
    """The pod's set activity, else a hashed one: every field reads the same, the tensor pipe a share of it."""
    if run.activity in ACTIVITIES:
        return ACTIVITIES[run.activity]
    used = pod_utilisation(run.name, hour)
    return Activity(used, used, used, round(used * unit(run.name, "tensor"), 4))


def held_memory(run: PodRun, doing: Activity) -> float:
    """GiB one of the pod's units holds: what its activity holds, else a share of the unit's that grows with work."""
    if doing.memory_gib is not None:
        return min(run.memory_gib, doing.memory_gib)
    return run.memory_gib * min(1.0, 0.2 + doing.sm_active)


def device_uuid(run: PodRun, index: int) -> str:
    """A stable UUID in NVML's spelling for the pod's `index`-th unit (a sandbox has no devices to name)."""
    digest = hashlib.sha256(f"{run.node}/{run.namespace}/{run.name}/{run.resource}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


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
    activity: str = ""  # a key of ACTIVITIES, from the pod's SANDBOX_GPU_ACTIVITY
    node: str = ""  # where it ran (spec.nodeName), which tells apart flavors sharing a resource and model


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
        doing = (meta.get("annotations") or {}).get(ACTIVITY_ANNOTATION) or next(
            (e.get("value", "") for c in spec.get("containers") or [] for e in c.get("env") or []
             if e.get("name") == ACTIVITY_ENV), "")
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
                               memory_gib=memory, activity=doing, node=spec.get("nodeName") or ""))
    return runs


class SandboxSource:
    """Deterministic usage from pod runs: allocation from when each pod ran, activity as each pod sets it (or from a
    hash), read on the best of the `exported` fields. With `capacity` ((resource, GPU model) → units the cluster
    has), every hour also reports those units as seen, the pods' allocation as held (a sandbox has no exporters to
    say more); with `node_capacity` ((resource, GPU model, node) → units) it says the same per node."""

    def __init__(self, runs: Callable[[], Iterable[PodRun]], capacity: dict[tuple[str, str], int] | None = None,
                 exported: Iterable[str] = activity.FIELDS,
                 node_capacity: dict[tuple[str, str, str], float] | None = None):
        self._runs = runs
        self._capacity = capacity or {}
        self._node_capacity = node_capacity or {}
        self.exported = frozenset(exported)
        self.signal = activity.best_signal(self.exported)

    @classmethod
    def for_cluster(cls, cluster) -> SandboxSource:
        """The pods of the cluster, listed once however many hours this source is asked about."""
        listed: dict[str, list[PodRun]] = {}

        def runs():
            if "pods" not in listed:
                listed["pods"] = cluster_pod_runs(cluster)
            return listed["pods"]

        return cls(runs, capacity=cluster_capacity(cluster), node_capacity=cluster_node_capacity(cluster))

    def runs(self) -> Iterable[PodRun]:
        return self._runs()

    def activity_now(self, now: datetime) -> list[PodReading]:
        """The running pods, each doing what it is set to (idle, busy, …) in the hour of `now`."""
        hour = now.replace(minute=0, second=0, microsecond=0)
        readings = []
        for run in self._runs():
            if run.finished_at is not None:
                continue
            doing = pod_activity(run, hour)
            readings.append(PodReading(namespace=run.namespace, pod=run.name, job=run.job, signal=self.signal,
                                       utilisation=doing.reading(self.signal),
                                       memory_gib=doing.memory_gib if doing.memory_gib is not None else 0.0))
        return readings

    def job_gpus(self, *, namespace: str, job: str, pod_prefix: str, start: datetime, end: datetime) -> JobGpus:
        """Each GPU of the job's pods (by the job label, else the name prefix), step by step while its pod ran,
        doing what the pod is set to (the collector's hours are these steps' sums); the devices are named from
        the pod and node, as no exporter names them here."""
        step = gpus.step_for(start, end)
        first, last = gpus.evaluation_times(start, end, step)
        found = []
        for run in self._runs():
            if run.namespace != namespace or not (run.job == job or (not run.job and
                                                                     run.name.startswith(f"{pod_prefix}-"))):
                continue
            steps = []
            at = first
            while at <= last:
                if run.started_at < at and (run.finished_at is None or run.finished_at > at - timedelta(seconds=step)):
                    steps.append(at)
                at += timedelta(seconds=step)
            for index in range(run.gpus):
                series = gpus.GpuSeries(gpus.Gpu(uuid=device_uuid(run, index), index=str(index), node=run.node,
                                                 model=run.gpu_model, pod=run.name))
                for at in steps:
                    doing = pod_activity(run, (at - timedelta(seconds=step / 2)).replace(minute=0, second=0,
                                                                                        microsecond=0))
                    series.utilisation[at] = doing.reading(self.signal)
                    series.memory_gib[at] = held_memory(run, doing)
                found.append(series)
        found.sort(key=lambda s: (s.gpu.node, s.gpu.pod, int(s.gpu.index)))
        return gpus.JobGpus(signal=self.signal, step=step, start=start, end=end, gpus=found)

    def hour_usage(self, hour: datetime) -> HourUsage:
        hour = check_hour(hour)
        end = hour + HOUR
        usage = HourUsage(hour=hour, signal=self.signal, exported=self.exported)
        for run in self._runs():
            overlap = (min(run.finished_at or end, end) - max(run.started_at, hour)).total_seconds()
            if overlap <= 0:
                continue
            held = run.gpus * overlap / 3600
            doing = pod_activity(run, hour)
            memory = held_memory(run, doing)
            row = Usage(allocated_gpu_hours=held, used_gpu_hours=held * doing.reading(self.signal),
                        memory_gib_hours=held * memory,
                        energy_kwh=held * run.max_power_watts * (0.1 + 0.9 * doing.sm_active) / 1000)
            for measured in usage.node_usage((run.namespace, run.resource, run.gpu_model), run.node):
                measured.add(row)
            if run.job:
                usage.job_usage((run.namespace, run.job)).add(Usage(
                    allocated_gpu_hours=held, used_gpu_hours=row.used_gpu_hours, memory_gib_hours=held * memory,
                    sm_active_gpu_hours=held * doing.reading(activity.SM_ACTIVE),
                    tensor_active_gpu_hours=held * doing.reading(activity.TENSOR_ACTIVE)))
        for unit, units in self._capacity.items():
            held = sum(u.allocated_gpu_hours for (_, resource, model), u in usage.namespaces.items()
                       if (resource, model) == unit)
            usage.capacity[unit] = Capacity(capacity=float(units), held=min(float(units), held))
        for (resource, model, node), units in self._node_capacity.items():
            held = sum(u.allocated_gpu_hours for key, u in usage.node_namespaces.items()
                       if key[1:] == (resource, model, node))
            # Not capped per node: synthetic runs may pile onto one node; the collector caps each flavor's total.
            usage.node_capacity[(resource, model, node)] = Capacity(capacity=float(units), held=held)
        return usage


def source_for_sandbox(cluster) -> SandboxSource | None:
    """The synthetic source of a sandbox cluster (one without a Prometheus URL; billing asks only about those)."""
    return SandboxSource.for_cluster(cluster) if cluster.connection == Connection.SANDBOX else None


def cluster_capacity(cluster) -> dict[tuple[str, str], int]:
    """The units each flavor of a sandbox cluster declares, keyed as the collection keys devices."""
    capacity: dict[tuple[str, str], int] = {}
    for flavor in cluster.flavors.all():
        resource = devices.flavor_unit(flavor) if devices.is_dra(flavor) else ksm_resource(flavor.resource_name)
        unit = (resource, flavor.gpu_model)
        capacity[unit] = capacity.get(unit, 0) + flavor.capacity
    return capacity


def shared_flavors(cluster) -> list[list]:
    """Groups of a cluster's flavors sharing one resource and GPU model, told apart only by their nodes' labels."""
    groups: dict[tuple[str, str], list] = {}
    for flavor in cluster.flavors.all():
        resource = devices.flavor_unit(flavor) if devices.is_dra(flavor) else ksm_resource(flavor.resource_name)
        groups.setdefault((resource, flavor.gpu_model), []).append(flavor)
    return [group for (_, model), group in groups.items() if model and len(group) > 1]


def flavor_nodes(cluster, node_labels: dict[str, dict[str, str]] | None = None) -> dict[int, list[str]]:
    """flavor pk → the nodes of the cluster that are its own, for flavors sharing a resource and GPU model."""
    groups = shared_flavors(cluster)
    if not groups:
        return {}
    if node_labels is None:
        node_labels = nodes.cluster_node_labels(cluster)
    found: dict[int, list[str]] = {}
    for group in groups:
        for name, labels in sorted(node_labels.items()):
            flavor = nodes.flavor_on_node(group, labels)
            if flavor is not None:
                found.setdefault(flavor.pk, []).append(name)
    return found


def cluster_node_capacity(cluster, owned: dict[int, list[str]] | None = None) -> dict[tuple[str, str, str], float]:
    """Each shared flavor's declared units spread over its nodes (empty when no flavors share a resource and
    model, so only then are the nodes listed)."""
    owned = flavor_nodes(cluster) if owned is None else owned
    capacity: dict[tuple[str, str, str], float] = {}
    for flavor in cluster.flavors.all():
        for node in owned.get(flavor.pk, []):
            resource = devices.flavor_unit(flavor) if devices.is_dra(flavor) else ksm_resource(flavor.resource_name)
            capacity[(resource, flavor.gpu_model, node)] = flavor.capacity / len(owned[flavor.pk])
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
