"""What every part of the simulation shares: the job record, pod sets, condition helpers and store access."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from ..errors import ApiError
from ..quantity import parse_quantity

ANNOTATION = "sandbox.gpu-portal.io/"
DURATION_ANNOTATION = ANNOTATION + "duration-seconds"
STARTUP_ANNOTATION = ANNOTATION + "startup-seconds"
OUTCOME_ANNOTATION = ANNOTATION + "outcome"
OUTCOMES = ("succeed", "fail", "preempt")
KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
BATCH_JOB = ("batch", "Job")
VCJOB = ("batch.volcano.sh", "Job")
RAYJOB = ("ray.io", "RayJob")
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@contextlib.contextmanager
def unless_gone(*also: int):
    """A write to an object deleted meanwhile (404) is moot; any other refusal is a simulator bug and is raised."""
    try:
        yield
    except ApiError as exc:
        if exc.code not in (404, *also):
            raise


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def condition(kind: str, status: bool, reason: str, message: str, now: float, generation: int = 1) -> dict:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": iso(now), "observedGeneration": generation}


def set_conditions(existing: list[dict], *updates: dict) -> list[dict]:
    """Replace conditions by type, keeping lastTransitionTime while the status stays (as SetStatusCondition does)."""
    by_type = {c["type"]: c for c in existing}
    for update in updates:
        old = by_type.get(update["type"])
        if old is not None and old.get("status") == update["status"]:
            update = {**update, "lastTransitionTime": old.get("lastTransitionTime", update["lastTransitionTime"])}
        by_type[update["type"]] = update
    return list(by_type.values())


def fmt(value: Decimal) -> str:
    """A quantity as Kubernetes prints it: whole numbers plain, fractions in milli-units (500m)."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    return f"{int(milli)}m" if milli == milli.to_integral_value() else format(value.normalize(), "f")


def pod_requests(template: dict) -> dict[str, Decimal]:
    """What one pod asks for, as schedulers count it: the containers' requests, where a resource has only a limit
    the limit (the API server defaults a missing request to the limit; GPUs are given as limits only).
    Kueue's pkg/resources and Volcano's api.NewResource both count requests."""
    total: dict[str, Decimal] = defaultdict(Decimal)
    for container in ((template.get("spec") or {}).get("containers") or []):
        resources = container.get("resources") or {}
        for name, value in {**(resources.get("limits") or {}), **(resources.get("requests") or {})}.items():
            total[name] += parse_quantity(value)
    return dict(total)


@dataclass
class PodSet:
    name: str
    count: int
    template: dict
    requests: dict[str, Decimal]
    min_count: int | None = None  # the gang minimum where it is below `count` (Volcano's minAvailable)
    creates_pods: bool = True  # False for a pod set counted for quota but run by another controller


@dataclass
class Tracked:
    """A job the simulator drives, from creation until it finishes or is deleted."""

    kind: tuple[str, str]
    api_version: str
    namespace: str
    name: str
    uid: str
    backend: str  # "kueue" | "volcano"
    queue: str  # LocalQueue name (Kueue) or Queue name (Volcano)
    seq: int
    priority: int
    may_preempt: bool
    pod_sets: list[PodSet]
    duration: float
    startup: float
    outcome: str
    deadline: float | None
    min_available: int = 0  # Volcano's gang minimum (the vcjob's minAvailable); 0 = every pod
    scheduler_object: str = ""  # the Workload or PodGroup name
    scheduler_uid: str = ""
    state: str = "pending"  # pending | starting | running
    cluster_queue: str = ""
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)  # pod set -> resource -> flavor
    topology: dict[str, dict] = field(default_factory=dict)  # pod set -> Kueue TAS placement (kueue_tas.place)
    network_topology: dict = field(default_factory=dict)  # a Volcano Job's spec.networkTopology
    nodes: list[str] = field(default_factory=list)  # the node of each pod it runs, in pod order (Volcano with Nodes)
    admitted_at: float = 0.0
    running_at: float = 0.0
    requeue_at: float = 0.0
    evicted: bool = False
    enqueued: bool = False  # Volcano: the PodGroup passed enqueue
    limit: int | None = None  # how many of its pods run (Volcano may place fewer than all, never below the gang)
    waiting: tuple | None = None  # the (reason, message) last written while pending, so it is written once
    requeues: int = 0  # Kueue: evictions by the PodsReady timeout so far (its requeueState.count)
    record_refused: str = ""  # why admission refused its Workload/PodGroup (made again each step until accepted)
    pods: list[str] = field(default_factory=list)
    cluster_name: str = ""  # RayCluster name
    refusal: str = ""  # why its scheduler cannot count it at all (Kueue: a DRA class with no mapping)

    @property
    def key(self) -> tuple:
        return (self.kind, self.namespace, self.name)

    @property
    def total(self) -> dict[str, Decimal]:
        total: dict[str, Decimal] = defaultdict(Decimal)
        for pod_set in self.pod_sets:
            for name, value in pod_set.requests.items():
                total[name] += value * pod_set.count
        return dict(total)

    @property
    def pod_count(self) -> int:
        return sum(p.count for p in self.pod_sets if p.creates_pods)


def kueue_workload_name(kind: str, name: str, uid: str, api_version: str) -> str:
    """Kueue's GetWorkloadNameForOwnerWithGVK: `<kind>-<name>-<5 hex of a hash of name, uid and GVK>`."""
    prefixed = f"{kind.lower()}-{name}"[:247]
    digest = hashlib.sha1(f"{name}\x00{uid}\x00{api_version}\x00{kind}".encode()).hexdigest()
    return f"{prefixed}-{digest[:5]}"


class Objects:
    """The store as the controllers see it: kinds that are not installed read as absent, writes to objects deleted
    meanwhile are dropped. `write_cpu` adds up the CPU seconds spent writing (the API server's share of a step)."""

    def __init__(self, store):
        self.store = store
        self.write_cpu = 0.0

    @contextlib.contextmanager
    def writing(self):
        started = time.process_time()
        try:
            yield
        finally:
            self.write_cpu += time.process_time() - started

    def kind(self, api_version, kind):
        try:
            return self.store.kind(api_version, kind)
        except KeyError:
            return None

    def installed(self, api_version, kind) -> bool:
        return self.kind(api_version, kind) is not None

    def get(self, api_version, kind, namespace, name) -> dict | None:
        rt = self.kind(api_version, kind)
        if rt is None:
            return None
        try:
            return self.store.get(rt, namespace, name)
        except ApiError:
            return None

    def list(self, api_version, kind, namespace=None) -> list[dict]:
        rt = self.kind(api_version, kind)
        return [] if rt is None else self.store.list(rt, namespace)["items"]

    def create(self, body: dict) -> dict | None:
        rt = self.kind(body["apiVersion"], body["kind"])
        if rt is None:
            return None
        with self.writing(), unless_gone(409):  # already there: a restarted simulator meets what it made before
            return self.store.create(rt, body, strict=True)
        return None

    def create_refusable(self, body: dict) -> tuple[dict | None, str]:
        """`create` where an admission webhook may say no: (object, "") or (None, the API server's message)."""
        try:
            return self.create(body), ""
        except ApiError as exc:
            if exc.code not in (400, 403, 422):
                raise
            return None, exc.message

    def event(self, involved: dict, reason: str, message: str, now: float, component: str, type_="Normal") -> None:
        """A core/v1 Event about `involved` (apiVersion, kind, name, namespace, uid)."""
        name = f"{involved['name']}.{hashlib.sha1(f'{reason}{message}{now}'.encode()).hexdigest()[:10]}"
        self.create({"apiVersion": "v1", "kind": "Event",
                     "metadata": {"name": name, "namespace": involved["namespace"]},
                     "involvedObject": involved, "reason": reason, "message": message, "type": type_, "count": 1,
                     "firstTimestamp": iso(now), "lastTimestamp": iso(now), "source": {"component": component}})

    def patch_status(self, api_version, kind, namespace, name, status: dict) -> None:
        rt = self.kind(api_version, kind)
        if rt is not None:
            with self.writing(), unless_gone():
                self.store.patch(rt, namespace, name, {"status": status}, "merge", subresource="status", strict=True)

    def patch(self, api_version, kind, namespace, name, body: dict) -> None:
        rt = self.kind(api_version, kind)
        if rt is not None:
            with self.writing(), unless_gone():
                self.store.patch(rt, namespace, name, body, "merge", strict=True)

    def delete(self, api_version, kind, namespace, name) -> None:
        rt = self.kind(api_version, kind)
        if rt is not None:
            with self.writing(), unless_gone():
                self.store.delete(rt, namespace, name)

    def conditions(self, api_version, kind, namespace, name) -> list[dict]:
        return ((self.get(api_version, kind, namespace, name) or {}).get("status") or {}).get("conditions") or []


def owner(job: Tracked) -> dict:
    return {"apiVersion": job.api_version, "kind": job.kind[1], "name": job.name, "uid": job.uid,
            "controller": True, "blockOwnerDeletion": True}


class Scheduler(Protocol):
    """What the engine asks of a batch scheduler (`kueue.Kueue`, `volcano.Volcano`)."""

    backend: str  # "kueue" | "volcano"
    record: tuple[str, str]  # (apiVersion, kind) of its own record of a job: Workload, PodGroup

    def installed(self) -> bool: ...  # its record kind is served
    def prepare(self) -> None: ...  # objects it makes at start (Volcano's default queue)
    def claims(self, kind, labels: dict, spec: dict) -> str: ...  # the job's queue, or "" when not its job
    def priority(self, labels: dict, priority_class: str) -> tuple[int, bool]: ...  # (value, may preempt)
    def queue_id(self, job: Tracked) -> str: ...
    def record_name(self, job: Tracked) -> str: ...
    def create_record(self, job: Tracked, obj: dict, now: float) -> None: ...
    def snapshot(self) -> dict: ...  # its configuration and quota, read once per step
    def order(self, jobs: list[Tracked], config: dict) -> list[Tracked]: ...
    def schedule(self, job: Tracked, config: dict, now: float) -> None: ...  # admit (engine.admit), evict, or wait
    def charge(self, job: Tracked, sign: int, config: dict | None = None) -> None: ...  # usage in or out
    def admitted_status(self, job: Tracked, now: float) -> None: ...
    def running_status(self, job: Tracked, now: float) -> None: ...
    def finished_status(self, job: Tracked, now: float, succeeded: bool, message: str) -> None: ...
    def evicted_status(self, job: Tracked, now: float, message: str, reason: str) -> None: ...
    def adopt(self, job: Tracked, record: dict | None) -> None: ...  # take over a running job after a restart
