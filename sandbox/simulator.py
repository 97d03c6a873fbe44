"""A scheduler and kubelet for the sandbox: Kueue, Volcano, the Job controller and KubeRay, simulated.

It watches the store (`store.subscribe`) for batch/v1 Jobs and KubeRay RayJobs labelled with a Kueue LocalQueue,
and for Volcano vcjobs (and RayJobs labelled with a Volcano queue), and drives them the way the real controllers
do, writing the objects and statuses they write:

- Kueue: the mutating webhook suspends a queued Job/RayJob; a `Workload` (named and owned as Kueue names it) is
  created with its pod sets and priority; it is admitted when its ClusterQueue has room (nominal quota first, then
  borrowing from the cohort up to `borrowingLimit`), all pod sets at once, higher priority first then FIFO,
  preempting lower-priority workloads when the ClusterQueue's `preemption` allows; otherwise it stays pending with
  Kueue's own "insufficient unused quota" message.
- Volcano: a `PodGroup` with `minMember`, Pending → Inqueue → Running when the team's Queue has room
  (`capability`, and the cluster's capacity with reclaim for queues under their `deserved` share), else an
  `Unschedulable` condition.
- Job controller / KubeRay / kubelet: on admission the job is unsuspended, its pods are created (Pending for the
  startup time, then Running), and after the declared duration it finishes: Complete or Failed.

Time comes from `step(now)`: tests drive it with an explicit clock; `start()` runs a background ticker. Work per
step is proportional to the jobs that are pending or running, never to the history (finished jobs are dropped
from the index, usage is kept incrementally per queue).

Per job, from annotations or `plan()` (the `/_sandbox/jobs/...` endpoint): `duration-seconds` (how long it runs,
default `SANDBOX_JOB_DURATION_SECONDS` or 60), `startup-seconds` (pods Pending before Running, default
`SANDBOX_JOB_STARTUP_SECONDS` or 1), `outcome` (`succeed`, `fail` or `preempt` when the duration is up).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import random
import threading
import time
import traceback
from collections import defaultdict, deque
from dataclasses import dataclass, field
from decimal import Decimal

from .errors import ApiError
from .quantity import parse_quantity
from .store import ADDED, DELETED

ANNOTATION = "sandbox.gpu-portal.io/"
DURATION_ANNOTATION = ANNOTATION + "duration-seconds"
STARTUP_ANNOTATION = ANNOTATION + "startup-seconds"
OUTCOME_ANNOTATION = ANNOTATION + "outcome"
OUTCOMES = ("succeed", "fail", "preempt")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
VOLCANO_QUEUE_LABEL = "volcano.sh/queue-name"
KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
BATCH_JOB = ("batch", "Job")
VCJOB = ("batch.volcano.sh", "Job")
RAYJOB = ("ray.io", "RayJob")
REQUEUE_AFTER_REQUESTED_PREEMPTION = 3600.0
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@contextlib.contextmanager
def _unless_gone(*also: int):
    """A write to an object deleted meanwhile (404) is moot; any other refusal is a simulator bug and is raised."""
    try:
        yield
    except ApiError as exc:
        if exc.code not in (404, *also):
            raise


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _condition(kind: str, status: bool, reason: str, message: str, now: float, generation: int = 1) -> dict:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": _iso(now), "observedGeneration": generation}


def _set_conditions(existing: list[dict], *updates: dict) -> list[dict]:
    """Replace conditions by type, keeping lastTransitionTime while the status stays (as SetStatusCondition does)."""
    by_type = {c["type"]: c for c in existing}
    for update in updates:
        old = by_type.get(update["type"])
        if old is not None and old.get("status") == update["status"]:
            update = {**update, "lastTransitionTime": old.get("lastTransitionTime", update["lastTransitionTime"])}
        by_type[update["type"]] = update
    return list(by_type.values())


def _fmt(value: Decimal) -> str:
    return str(value.normalize()) if value == value.to_integral_value() else format(value.normalize(), "f")


def pod_requests(template: dict) -> dict[str, Decimal]:
    """What one pod asks for, as the scheduler counts it: per resource the larger of request and limit
    (extended resources such as GPUs are given as limits only)."""
    total: dict[str, Decimal] = defaultdict(Decimal)
    for container in ((template.get("spec") or {}).get("containers") or []):
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name in merged:
            values = [parse_quantity(v) for v in ((resources.get("requests") or {}).get(name),
                                                  (resources.get("limits") or {}).get(name)) if v is not None]
            total[name] += max(values)
    return dict(total)


@dataclass
class PodSet:
    name: str
    count: int
    template: dict
    requests: dict[str, Decimal]


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
    scheduler_object: str = ""  # the Workload or PodGroup name
    scheduler_uid: str = ""
    state: str = "pending"  # pending | starting | running
    cluster_queue: str = ""
    flavors: dict[str, str] = field(default_factory=dict)  # resource -> flavor, at admission
    admitted_at: float = 0.0
    running_at: float = 0.0
    requeue_at: float = 0.0
    pods: list[str] = field(default_factory=list)
    cluster_name: str = ""  # RayCluster name

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
        return sum(p.count for p in self.pod_sets)


def kueue_workload_name(kind: str, name: str, uid: str, api_version: str) -> str:
    """Kueue's GetWorkloadNameForOwnerWithGVK: `<kind>-<name>-<5 hex of a hash of name, uid and GVK>`."""
    prefixed = f"{kind.lower()}-{name}"[:247]
    digest = hashlib.sha1(f"{name}\x00{uid}\x00{api_version}\x00{kind}".encode()).hexdigest()
    return f"{prefixed}-{digest[:5]}"


class Simulator:
    def __init__(self, store, *, duration: float | None = None, startup: float | None = None,
                 clock=time.time, seed: int = 0):
        self.store = store
        self.clock = clock
        self.default_duration = float(duration if duration is not None
                                      else os.environ.get("SANDBOX_JOB_DURATION_SECONDS", 60))
        self.default_startup = float(startup if startup is not None
                                     else os.environ.get("SANDBOX_JOB_STARTUP_SECONDS", 1))
        self._random = random.Random(seed)
        self._lock = threading.RLock()
        self._events: deque = deque()
        self._jobs: dict[tuple, Tracked] = {}
        self._pending: dict[str, dict[tuple, Tracked]] = defaultdict(dict)  # queue id -> pending jobs
        self._active: dict[tuple, Tracked] = {}
        self._usage: dict[tuple, Decimal] = defaultdict(Decimal)  # (queue id, flavor, resource) -> in use
        self._finished: dict[tuple, Tracked] = {}  # ended jobs whose objects still exist, for garbage collection
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._unsubscribe = store.subscribe(self._on_change)
        self._rt = {key: store.registry.by_key.get(key) for key in (BATCH_JOB, VCJOB, RAYJOB)}

    # Events ----------------------------------------------------------------------------------------------------

    def _on_change(self, event_type, rt, obj) -> None:
        """Runs under the store lock: only Kueue's webhook acts here (it suspends before anything can start);
        everything else is queued for the next step."""
        if rt.key not in (BATCH_JOB, VCJOB, RAYJOB):
            return
        labels = obj["metadata"].get("labels") or {}
        if event_type == ADDED and rt.key != VCJOB and labels.get(QUEUE_LABEL) and not obj.get("spec", {}).get(
                "suspend"):
            self.store.patch(rt, obj["metadata"]["namespace"], obj["metadata"]["name"], {"spec": {"suspend": True}},
                             "merge")
        if event_type in (ADDED, DELETED):
            self._events.append((event_type, rt.key, obj))

    def _drain(self, now: float) -> None:
        while self._events:
            event_type, kind, obj = self._events.popleft()
            meta = obj["metadata"]
            key = (kind, meta["namespace"], meta["name"])
            if event_type == DELETED:
                job = self._jobs.get(key) or self._finished.pop(key, None)
                if job is not None and job.uid == meta.get("uid"):
                    self._forget(job, delete_children=True)
            elif key not in self._jobs:
                job = self._track(kind, obj, now)
                if job is not None:
                    self._jobs[key] = job
                    self._pending[self._queue_id(job)][key] = job
                    self._create_scheduler_object(job, obj, now)

    def _track(self, kind, obj, now) -> Tracked | None:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
        if kind == VCJOB:
            backend, queue = "volcano", spec.get("queue") or "default"
        elif labels.get(QUEUE_LABEL):
            backend, queue = "kueue", labels[QUEUE_LABEL]
        elif kind == RAYJOB and labels.get(VOLCANO_QUEUE_LABEL):
            backend, queue = "volcano", labels[VOLCANO_QUEUE_LABEL]
        else:
            return None  # not for a batch scheduler: nothing in this sandbox runs it
        pod_sets = self._pod_sets(kind, spec)
        priority, may_preempt = self._priority(backend, kind, labels, spec)
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is None and kind == VCJOB:
            deadline = ((spec.get("tasks") or [{}])[0].get("template", {}).get("spec", {})
                        .get("activeDeadlineSeconds"))
        return Tracked(
            kind=kind, api_version=obj["apiVersion"], namespace=meta["namespace"], name=meta["name"],
            uid=meta.get("uid", ""), backend=backend, queue=queue, seq=next(self._seq), priority=priority,
            may_preempt=may_preempt, pod_sets=pod_sets,
            duration=float(notes.get(DURATION_ANNOTATION, self.default_duration)),
            startup=float(notes.get(STARTUP_ANNOTATION, self.default_startup)),
            outcome=notes.get(OUTCOME_ANNOTATION, "succeed") if notes.get(OUTCOME_ANNOTATION) in OUTCOMES
            else "succeed",
            deadline=float(deadline) if deadline else None,
        )

    @staticmethod
    def _pod_sets(kind, spec) -> list[PodSet]:
        if kind == BATCH_JOB:
            template = spec.get("template") or {}
            return [PodSet("main", int(spec.get("parallelism", 1)), template, pod_requests(template))]
        if kind == VCJOB:
            return [PodSet(t.get("name", f"default{i}"), int(t.get("replicas", 1)), t.get("template") or {},
                           pod_requests(t.get("template") or {})) for i, t in enumerate(spec.get("tasks") or [])]
        cluster = spec.get("rayClusterSpec") or {}
        head = (cluster.get("headGroupSpec") or {}).get("template") or {}
        sets = [PodSet("head", 1, head, pod_requests(head))]
        for group in cluster.get("workerGroupSpecs") or []:
            template = group.get("template") or {}
            sets.append(PodSet(group["groupName"], int(group.get("replicas", 0)), template, pod_requests(template)))
        return sets

    def _priority(self, backend, kind, labels, spec) -> tuple[int, bool]:
        """Kueue: the WorkloadPriorityClass label (else the pods' PriorityClass); Volcano: the PriorityClass.
        A PriorityClass with preemptionPolicy Never may not preempt (Volcano honours it)."""
        if backend == "kueue" and labels.get(PRIORITY_LABEL):
            wpc = self._get("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", None, labels[PRIORITY_LABEL])
            return (int(wpc.get("value", 0)) if wpc else 0), True
        if kind == VCJOB:
            name = spec.get("priorityClassName", "")
        elif kind == RAYJOB:
            name = labels.get("ray.io/priority-class-name", "")
        else:
            name = ((spec.get("template") or {}).get("spec") or {}).get("priorityClassName", "")
        pc = self._get("scheduling.k8s.io/v1", "PriorityClass", None, name) if name else None
        if pc is None:
            return 0, True
        return int(pc.get("value", 0)), backend == "kueue" or pc.get("preemptionPolicy") != "Never"

    # Store access ----------------------------------------------------------------------------------------------

    def _kind(self, api_version, kind):
        try:
            return self.store.kind(api_version, kind)
        except KeyError:
            return None

    def _get(self, api_version, kind, namespace, name) -> dict | None:
        rt = self._kind(api_version, kind)
        if rt is None:
            return None
        try:
            return self.store.get(rt, namespace, name)
        except ApiError:
            return None

    def _list(self, api_version, kind, namespace=None) -> list[dict]:
        rt = self._kind(api_version, kind)
        return [] if rt is None else self.store.list(rt, namespace)["items"]

    def _patch_status(self, api_version, kind, namespace, name, status: dict) -> None:
        with _unless_gone():
            self.store.patch(self._kind(api_version, kind), namespace, name, {"status": status}, "merge",
                             subresource="status", strict=True)

    def _patch(self, api_version, kind, namespace, name, body: dict) -> None:
        with _unless_gone():
            self.store.patch(self._kind(api_version, kind), namespace, name, body, "merge", strict=True)

    def _delete(self, api_version, kind, namespace, name) -> None:
        rt = self._kind(api_version, kind)
        if rt is not None:
            with _unless_gone():
                self.store.delete(rt, namespace, name)

    def _owner(self, job: Tracked) -> dict:
        return {"apiVersion": job.api_version, "kind": job.kind[1], "name": job.name, "uid": job.uid,
                "controller": True, "blockOwnerDeletion": True}

    # Scheduler objects -----------------------------------------------------------------------------------------

    def _create_scheduler_object(self, job: Tracked, obj: dict, now: float) -> None:
        if job.backend == "kueue":
            job.scheduler_object = kueue_workload_name(job.kind[1], job.name, job.uid, job.api_version)
            labels = obj["metadata"].get("labels") or {}
            spec = {"queueName": job.queue, "priority": job.priority, "active": True,
                    "podSets": [{"name": p.name, "count": p.count, "template": p.template} for p in job.pod_sets]}
            if labels.get(PRIORITY_LABEL):
                spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                            "name": labels[PRIORITY_LABEL]}
            body = {"apiVersion": KUEUE, "kind": "Workload",
                    "metadata": {"name": job.scheduler_object, "namespace": job.namespace,
                                 "labels": {"kueue.x-k8s.io/job-uid": job.uid},
                                 "ownerReferences": [self._owner(job)]}, "spec": spec}
        else:
            job.scheduler_object = f"{job.name}-{job.uid}" if job.kind == VCJOB else f"ray-{job.name}-pg"
            spec = {"minMember": job.pod_count, "queue": job.queue,
                    "minResources": {k: _fmt(v) for k, v in sorted(job.total.items())},
                    "minTaskMember": {p.name: p.count for p in job.pod_sets}}
            pc = (obj.get("spec") or {}).get("priorityClassName")
            if pc:
                spec["priorityClassName"] = pc
            body = {"apiVersion": VOLCANO, "kind": "PodGroup",
                    "metadata": {"name": job.scheduler_object, "namespace": job.namespace,
                                 "annotations": {"volcano.sh/job-name": job.name} if job.kind == VCJOB else {},
                                 "ownerReferences": [self._owner(job)]}, "spec": spec}
        rt = self._kind(body["apiVersion"], body["kind"])
        with _unless_gone(409):  # already there: a restarted simulator meets the objects it made before
            job.scheduler_uid = self.store.create(rt, body, strict=True)["metadata"]["uid"]
        if job.backend == "volcano":
            self._patch_status(VOLCANO, "PodGroup", job.namespace, job.scheduler_object, {"phase": "Pending"})
            if job.kind == VCJOB:
                self._vcjob_phase(job, "Pending", now)
        elif job.kind == RAYJOB:
            self._patch_status(job.api_version, "RayJob", job.namespace, job.name,
                               {"jobDeploymentStatus": "Suspended", "jobStatus": ""})

    # Queues ----------------------------------------------------------------------------------------------------

    @staticmethod
    def _queue_id(job: Tracked) -> str:
        return f"lq/{job.namespace}/{job.queue}" if job.backend == "kueue" else f"vq/{job.queue}"

    def _kueue_config(self) -> dict:
        """ClusterQueues (quota per flavor and resource, cohort, preemption), LocalQueues, ResourceFlavors. Few
        objects, read once per step so quota changes apply at once."""
        queues = {}
        for cq in self._list(KUEUE, "ClusterQueue"):
            spec = cq.get("spec") or {}
            groups = []
            for group in spec.get("resourceGroups") or []:
                flavors = []
                for flavor in group.get("flavors") or []:
                    quota = {}
                    for resource in flavor.get("resources") or []:
                        limit = resource.get("borrowingLimit")
                        quota[resource["name"]] = (parse_quantity(resource.get("nominalQuota", 0)),
                                                   None if limit is None else parse_quantity(limit))
                    flavors.append((flavor["name"], quota))
                groups.append((set(group.get("coveredResources") or []), flavors))
            queues[cq["metadata"]["name"]] = {"cohort": spec.get("cohortName", ""), "groups": groups,
                                              "namespaces": spec.get("namespaceSelector"),
                                              "preemption": spec.get("preemption") or {},
                                              "held": spec.get("stopPolicy", "None") != "None"}
        local = {(lq["metadata"]["namespace"], lq["metadata"]["name"]): (lq.get("spec") or {}).get("clusterQueue")
                 for lq in self._list(KUEUE, "LocalQueue")}
        flavors = {rf["metadata"]["name"]: (rf.get("spec") or {}).get("nodeLabels") or {}
                   for rf in self._list(KUEUE, "ResourceFlavor")}
        return {"cq": queues, "lq": local, "rf": flavors}

    def _volcano_config(self) -> dict:
        queues = {}
        for q in self._list(VOLCANO, "Queue"):
            spec = q.get("spec") or {}

            def amounts(values):
                return {k: parse_quantity(v) for k, v in (values or {}).items()}

            queues[q["metadata"]["name"]] = {"capability": amounts(spec.get("capability")),
                                             "deserved": amounts(spec.get("deserved")),
                                             "reclaimable": spec.get("reclaimable", True),
                                             "leaf": True, "parent": spec.get("parent", "")}
        for q in queues.values():
            if q["parent"] in queues:
                queues[q["parent"]]["leaf"] = False
        capacity: dict[str, Decimal] = defaultdict(Decimal)
        nodes = self._list("v1", "Node")
        if nodes:
            for node in nodes:
                for k, v in ((node.get("status") or {}).get("allocatable") or {}).items():
                    capacity[k] += parse_quantity(v)
        else:  # no Nodes: the cluster holds what its leaf queues are promised
            for q in queues.values():
                if q["leaf"]:
                    for k, v in q["deserved"].items():
                        capacity[k] += v
        return {"queues": queues, "capacity": dict(capacity)}

    # The step --------------------------------------------------------------------------------------------------

    def step(self, now: float | None = None) -> None:
        """One scheduling and kubelet cycle at time `now` (default: the clock)."""
        now = self.clock() if now is None else now
        with self.store._lock, self._lock:
            self._drain(now)
            self._progress(now)
            if any(self._pending.values()):
                self._schedule(now)

    def _progress(self, now: float) -> None:
        for job in list(self._active.values()):
            if job.state == "starting" and now >= job.admitted_at + job.startup:
                self._set_running(job, now)
            if job.state == "running":
                ran = now - job.running_at
                if job.deadline is not None and job.deadline < job.duration and now - job.admitted_at >= \
                        job.deadline:
                    self._finish(job, now, "deadline")
                elif ran >= job.duration:
                    if job.outcome == "preempt":
                        self._evict(job, now, None, "requested")
                    else:
                        self._finish(job, now, job.outcome)

    def _schedule(self, now: float) -> None:
        kueue = volcano = None
        waiting = sorted((j for jobs in self._pending.values() for j in jobs.values() if j.requeue_at <= now),
                         key=lambda j: (-j.priority, j.seq))
        for job in waiting:
            if job.key not in self._jobs or job.state != "pending":
                continue
            if job.backend == "kueue":
                kueue = kueue or self._kueue_config()
                self._kueue_try(job, kueue, now)
            else:
                volcano = volcano or self._volcano_config()
                self._volcano_try(job, volcano, now)

    # Kueue -----------------------------------------------------------------------------------------------------

    def _kueue_assign(self, job: Tracked, cq_name: str, config: dict, usage=None) -> tuple[dict, list[str], bool]:
        """Flavor per requested resource, or the reasons it does not fit; `borrows` when above nominal."""
        usage = self._usage if usage is None else usage
        cq = config["cq"][cq_name]
        total, assigned, problems, borrows = job.total, {}, [], False
        selector = {}
        for pod_set in job.pod_sets:
            selector.update((pod_set.template.get("spec") or {}).get("nodeSelector") or {})
        for resource, amount in sorted(total.items()):
            if amount == 0:
                continue
            group = next((g for g in cq["groups"] if resource in g[0]), None)
            if group is None:
                problems.append(f"resource {resource} unavailable in ClusterQueue")
                continue
            reasons = []
            for flavor, quota in group[1]:
                labels = config["rf"].get(flavor, {})
                if any(k in labels and labels[k] != v for k, v in selector.items()):
                    reasons.append(f"flavor {flavor} doesn't match node affinity")
                    continue
                nominal, limit = quota.get(resource, (Decimal(0), None))
                used = usage[(cq_name, flavor, resource)]
                room = self._kueue_room(cq_name, cq, flavor, resource, nominal, limit, used, config, usage)
                if amount <= room:
                    assigned[resource] = flavor
                    borrows = borrows or used + amount > nominal
                    break
                if not cq["cohort"]:
                    most = nominal
                elif limit is not None:
                    most = nominal + limit
                else:
                    most = self._cohort_nominal(cq, flavor, resource, config)
                if amount > most:
                    reasons.append(f"insufficient quota for {resource} in flavor {flavor}, request > maximum "
                                   f"capacity ({_fmt(amount)} > {_fmt(most)})")
                else:
                    reasons.append(f"insufficient unused quota for {resource} in flavor {flavor}, "
                                   f"{_fmt(amount - max(room, Decimal(0)))} more needed")
            else:
                problems.extend(reasons)
        return assigned, problems, borrows

    def _cohort_members(self, cq: dict, config: dict) -> list[str]:
        return [name for name, other in config["cq"].items() if cq["cohort"] and other["cohort"] == cq["cohort"]]

    def _cohort_nominal(self, cq, flavor, resource, config) -> Decimal:
        total = Decimal(0)
        for name in self._cohort_members(cq, config):
            for _, flavors in config["cq"][name]["groups"]:
                for f, quota in flavors:
                    if f == flavor and resource in quota:
                        total += quota[resource][0]
        return total

    def _kueue_room(self, cq_name, cq, flavor, resource, nominal, limit, used, config, usage) -> Decimal:
        """How much more of `resource` in `flavor` this ClusterQueue may take now: its own unused nominal quota,
        or in a cohort whatever the cohort's nominal quota leaves unused, capped by the borrowing limit."""
        if not cq["cohort"]:
            return nominal - used
        members = self._cohort_members(cq, config)
        room = self._cohort_nominal(cq, flavor, resource, config) - sum(
            usage[(name, flavor, resource)] for name in members)
        if limit is not None:
            room = min(room, nominal + limit - used)
        return room

    def _kueue_try(self, job: Tracked, config: dict, now: float) -> None:
        cq_name = config["lq"].get((job.namespace, job.queue))
        if cq_name is None or cq_name not in config["cq"]:
            message = (f"LocalQueue {job.queue} doesn't exist" if cq_name is None
                       else f"ClusterQueue {cq_name} doesn't exist")
            return self._kueue_pending(job, message, now)
        if config["cq"][cq_name]["held"]:
            return self._kueue_pending(job, f"ClusterQueue {cq_name} is inactive", now)
        if not self._namespace_matches(job.namespace, config["cq"][cq_name]["namespaces"]):
            return self._kueue_pending(job, "Workload namespace doesn't match ClusterQueue selector", now)
        assigned, problems, _ = self._kueue_assign(job, cq_name, config)
        if problems:
            victims = self._kueue_victims(job, cq_name, config)
            for victim, reason in victims:
                self._evict(victim, now, job, reason)
            if victims:
                assigned, problems, _ = self._kueue_assign(job, cq_name, config)
        if problems:
            # Usage is counted per workload, so the pod set named is the last one: `main`, or Ray's worker group.
            return self._kueue_pending(
                job, f"couldn't assign flavors to pod set {job.pod_sets[-1].name}: {', '.join(problems)}", now)
        self._admit(job, now, cq_name, assigned)

    def _namespace_matches(self, namespace: str, selector: dict | None) -> bool:
        """A ClusterQueue's namespaceSelector: null matches no namespace, {} every one."""
        if selector is None:
            return False
        labels = ((self._get("v1", "Namespace", None, namespace) or {}).get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
            return False
        for expression in selector.get("matchExpressions") or []:
            key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
            present = key in labels
            matched = {"In": present and labels[key] in values, "NotIn": not present or labels[key] not in values,
                       "Exists": present, "DoesNotExist": not present}.get(operator, False)
            if not matched:
                return False
        return True

    def _kueue_victims(self, job: Tracked, cq_name: str, config: dict) -> list[tuple[Tracked, str]]:
        """Kueue's classic preemption: lower-priority workloads of the same ClusterQueue (withinClusterQueue), and
        workloads of other ClusterQueues in the cohort that borrow (reclaimWithinCohort), newest first, until the
        preemptor fits; none when it would not fit even then."""
        cq = config["cq"][cq_name]
        policy = cq["preemption"]
        within = policy.get("withinClusterQueue", "Never")
        reclaim = policy.get("reclaimWithinCohort", "Never")
        candidates = []
        reclaim = reclaim if self._within_nominal(job, cq_name, config) else "Never"
        for other in self._active.values():
            if other.backend != "kueue" or not other.cluster_queue:
                continue
            if other.cluster_queue == cq_name:
                if within != "Never" and other.priority < job.priority:
                    candidates.append((other, "InClusterQueue"))
            elif reclaim != "Never" and cq["cohort"] and config["cq"].get(other.cluster_queue, {}).get(
                    "cohort") == cq["cohort"] and self._borrowing(other, config):
                if reclaim == "Any" or other.priority < job.priority:
                    candidates.append((other, "InCohortReclamation"))
        candidates.sort(key=lambda c: (c[0].priority, -c[0].admitted_at, -c[0].seq))
        usage = defaultdict(Decimal, self._usage)
        chosen = []
        for other, reason in candidates:
            for resource, amount in other.total.items():
                if resource in other.flavors:
                    usage[(other.cluster_queue, other.flavors[resource], resource)] -= amount
            chosen.append((other, reason))
            if not self._kueue_assign(job, cq_name, config, usage)[1]:
                return chosen
        return []

    def _within_nominal(self, job: Tracked, cq_name: str, config: dict) -> bool:
        """Kueue reclaims from the cohort only for a workload that fits in its own ClusterQueue's nominal quota."""
        for resource, amount in job.total.items():
            group = next((g for g in config["cq"][cq_name]["groups"] if resource in g[0]), None)
            if amount and group is not None and not any(
                    self._usage[(cq_name, flavor, resource)] + amount <= quota.get(resource, (Decimal(0),))[0]
                    for flavor, quota in group[1]):
                return False
        return True

    def _borrowing(self, job: Tracked, config: dict) -> bool:
        cq = config["cq"].get(job.cluster_queue)
        if cq is None:
            return False
        for resource, flavor in job.flavors.items():
            for _, flavors in cq["groups"]:
                for name, quota in flavors:
                    if name == flavor and resource in quota and \
                            self._usage[(job.cluster_queue, flavor, resource)] > quota[resource][0]:
                        return True
        return False

    def _kueue_pending(self, job: Tracked, message: str, now: float) -> None:
        workload = self._get(KUEUE, "Workload", job.namespace, job.scheduler_object)
        if workload is None:
            return
        conditions = (workload.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c["type"] == "QuotaReserved"), {})
        if current.get("status") == "False" and current.get("message") == message:
            return  # written only when it changed
        update = _condition("QuotaReserved", False, "Pending", message, now)
        self._patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                           {"conditions": _set_conditions(conditions, update)})

    # Volcano ---------------------------------------------------------------------------------------------------

    def _volcano_fit(self, job: Tracked, config: dict, usage) -> list[str]:
        queue = config["queues"].get(job.queue)
        problems = []
        for resource, amount in sorted(job.total.items()):
            if amount == 0:
                continue
            used = usage[(f"vq/{job.queue}", "", resource)]
            cap = queue["capability"].get(resource)
            if cap is not None and used + amount > cap:
                problems.append(f"queue resource quota insufficient: {resource} {_fmt(used)} in use + "
                                f"{_fmt(amount)} requested > capability {_fmt(cap)}")
                continue
            total = config["capacity"].get(resource)
            in_use = sum(v for (q, _, r), v in usage.items() if r == resource and q.startswith("vq/"))
            if total is not None and in_use + amount > total:
                problems.append(f"insufficient {resource}: cluster {_fmt(total)}, {_fmt(in_use)} in use, "
                                f"{_fmt(amount)} requested")
        return problems

    def _volcano_try(self, job: Tracked, config: dict, now: float) -> None:
        queue = config["queues"].get(job.queue)
        if queue is None or not queue["leaf"]:
            return self._volcano_pending(job, f"queue {job.queue} is not an open leaf queue", now)
        problems = self._volcano_fit(job, config, self._usage)
        if problems:
            victims = self._volcano_victims(job, config)
            if not victims:
                return self._volcano_pending(job, "; ".join(problems), now)
            for victim, reason in victims:
                self._evict(victim, now, job, reason)
        self._admit(job, now, "", {})

    def _volcano_victims(self, job: Tracked, config: dict) -> list[tuple[Tracked, str]]:
        """Volcano's preempt action (lower priority, same queue) and reclaim action (queues above their deserved
        share give back to a queue under its own)."""
        if not job.may_preempt:
            return []
        mine = config["queues"][job.queue]
        under_deserved = all(self._usage[(f"vq/{job.queue}", "", r)] + a <= mine["deserved"][r]
                             for r, a in job.total.items() if a and r in mine["deserved"])
        candidates = []
        for other in self._active.values():
            if other.backend != "volcano":
                continue
            if other.queue == job.queue and other.priority < job.priority:
                candidates.append((other, "preempt"))
            elif other.queue != job.queue and under_deserved:
                theirs = config["queues"].get(other.queue)
                if theirs and theirs["reclaimable"] and any(
                        self._usage[(f"vq/{other.queue}", "", r)] > theirs["deserved"][r]
                        for r in other.total if r in theirs["deserved"]):
                    candidates.append((other, "reclaim"))
        candidates.sort(key=lambda c: (c[0].priority, -c[0].admitted_at, -c[0].seq))
        usage = defaultdict(Decimal, self._usage)
        chosen = []
        for other, reason in candidates:
            for resource, amount in other.total.items():
                usage[(f"vq/{other.queue}", "", resource)] -= amount
            chosen.append((other, reason))
            if not self._volcano_fit(job, config, usage):
                return chosen
        return []

    def _volcano_pending(self, job: Tracked, message: str, now: float) -> None:
        podgroup = self._get(VOLCANO, "PodGroup", job.namespace, job.scheduler_object)
        if podgroup is None:
            return
        conditions = (podgroup.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c["type"] == "Unschedulable"), {})
        if current.get("status") == "True" and current.get("message") == message:
            return
        update = {"type": "Unschedulable", "status": "True", "reason": "NotInqueueable", "message": message,
                  "lastTransitionTime": _iso(now), "transitionID": str(job.seq)}
        self._patch_status(VOLCANO, "PodGroup", job.namespace, job.scheduler_object,
                           {"phase": "Pending", "conditions": _set_conditions(conditions, update)})

    def _vcjob_phase(self, job: Tracked, phase: str, now: float, reason: str = "", message: str = "",
                     **counts) -> None:
        state = {"phase": phase, "lastTransitionTime": _iso(now)}
        if reason:
            state["reason"] = reason
        if message:
            state["message"] = message
        status = {"state": state, "minAvailable": job.pod_count, **counts}
        self._patch_status(job.api_version, "Job", job.namespace, job.name, status)

    # Admission, running, the end -------------------------------------------------------------------------------

    def _charge(self, job: Tracked, sign: int) -> None:
        for resource, amount in job.total.items():
            if job.backend == "kueue":
                if resource in job.flavors:
                    self._usage[(job.cluster_queue, job.flavors[resource], resource)] += sign * amount
            else:
                self._usage[(f"vq/{job.queue}", "", resource)] += sign * amount

    def _admit(self, job: Tracked, now: float, cq_name: str, assigned: dict) -> None:
        self._pending[self._queue_id(job)].pop(job.key, None)
        job.state, job.admitted_at, job.cluster_queue, job.flavors = "starting", now, cq_name, assigned
        self._charge(job, +1)
        self._active[job.key] = job
        if job.backend == "kueue":
            workload = self._get(KUEUE, "Workload", job.namespace, job.scheduler_object) or {}
            conditions = (workload.get("status") or {}).get("conditions") or []
            updates = [_condition("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}",
                                  now),
                       _condition("Admitted", True, "Admitted", "The workload is admitted", now)]
            if any(c["type"] == "Evicted" for c in conditions):
                updates.append(_condition("Evicted", False, "QuotaReserved", "Previously: evicted", now))
                updates.append(_condition("Requeued", True, "QuotaReserved", "The workload was requeued", now))
            assignments = [{"name": p.name, "count": p.count,
                            "flavors": {r: assigned[r] for r in sorted(p.requests) if r in assigned},
                            "resourceUsage": {r: _fmt(v * p.count) for r, v in sorted(p.requests.items())}}
                           for p in job.pod_sets]
            self._patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object, {
                "conditions": _set_conditions(conditions, *updates),
                "admission": {"clusterQueue": cq_name, "podSetAssignments": assignments}})
            self._patch(job.api_version, job.kind[1], job.namespace, job.name, {"spec": {"suspend": False}})
        else:
            self._patch_status(VOLCANO, "PodGroup", job.namespace, job.scheduler_object, {
                "phase": "Inqueue", "conditions": [
                    {"type": "Scheduled", "status": "False", "reason": "tasks in gang are ready to be scheduled",
                     "message": "", "lastTransitionTime": _iso(now), "transitionID": str(job.seq)}]})
        self._create_pods(job, now)
        if job.kind == BATCH_JOB:
            self._patch_status(job.api_version, "Job", job.namespace, job.name, {
                "startTime": _iso(now), "active": job.pod_count, "ready": 0, "terminating": 0})
        elif job.kind == VCJOB:
            self._vcjob_phase(job, "Pending", now, pending=job.pod_count)
        else:
            job.cluster_name = f"{job.name}-{self._suffix()}"
            self._patch_status(job.api_version, "RayJob", job.namespace, job.name, {
                "jobDeploymentStatus": "Initializing", "jobStatus": "", "rayClusterName": job.cluster_name,
                "jobId": f"{job.name}-{self._suffix()}", "startTime": _iso(now),
                "dashboardURL": f"{job.cluster_name}-head-svc.{job.namespace}.svc.cluster.local:8265"})

    def _suffix(self) -> str:
        return "".join(self._random.choices(_ALPHABET, k=5))

    def _pod_names(self, job: Tracked) -> list[tuple[str, PodSet, int]]:
        names = []
        for pod_set in job.pod_sets:
            for index in range(pod_set.count):
                if job.kind == BATCH_JOB:
                    names.append((f"{job.name}-{index}-{self._suffix()}", pod_set, index))
                elif job.kind == VCJOB:
                    names.append((f"{job.name}-{pod_set.name}-{index}", pod_set, index))
                else:
                    cluster = job.cluster_name or job.name
                    role = "head" if pod_set.name == "head" else f"{pod_set.name}-worker"
                    names.append((f"{cluster}-{role}-{self._suffix()}", pod_set, index))
        return names

    def _create_pods(self, job: Tracked, now: float) -> None:
        rt = self.store.registry.by_key[("", "Pod")]
        if job.kind == RAYJOB and not job.cluster_name:
            job.cluster_name = f"{job.name}-{self._suffix()}"
        for name, pod_set, index in self._pod_names(job):
            template = pod_set.template
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            annotations = dict((template.get("metadata") or {}).get("annotations") or {})
            if job.kind == BATCH_JOB:
                labels.update({"batch.kubernetes.io/job-name": job.name, "job-name": job.name,
                               "batch.kubernetes.io/controller-uid": job.uid,
                               "batch.kubernetes.io/job-completion-index": str(index)})
                annotations["batch.kubernetes.io/job-completion-index"] = str(index)
            elif job.kind == VCJOB:
                labels.update({"volcano.sh/job-name": job.name, "volcano.sh/task-spec": pod_set.name,
                               "volcano.sh/queue-name": job.queue})
                annotations.update({"scheduling.k8s.io/group-name": job.scheduler_object,
                                    "volcano.sh/task-index": str(index)})
            else:
                labels.update({"ray.io/cluster": job.cluster_name,
                               "ray.io/node-type": "head" if pod_set.name == "head" else "worker",
                               "ray.io/group": "headgroup" if pod_set.name == "head" else pod_set.name})
            spec = dict(template.get("spec") or {})
            if job.backend == "volcano":
                spec["schedulerName"] = "volcano"
            spec["nodeName"] = f"gpu-node-{index % 8}"
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": job.namespace, "labels": labels,
                                "annotations": annotations, "ownerReferences": [self._owner(job)]},
                   "spec": spec}
            try:
                self.store.create(rt, pod)
            except ApiError as exc:
                # A pod the API server refuses (e.g. an invalid template) fails the job, as the controller would.
                self._finish(job, now, "fail", message=f"Error creating pod: {exc}")
                return
            job.pods.append(name)
            self.store.set_log(job.namespace, name, f"{_iso(now)} pod {name} scheduled on {spec['nodeName']}\n")

    def _set_running(self, job: Tracked, now: float) -> None:
        job.state, job.running_at = "running", now
        for index, pod in enumerate(job.pods):
            self._patch_status("v1", "Pod", job.namespace, pod, {
                "phase": "Running", "startTime": _iso(job.admitted_at), "podIP": f"10.0.{job.seq % 250}.{index + 1}",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": _iso(now)}]})
            self.store.append_log(job.namespace, pod, f"{_iso(now)} started {job.kind[1]} {job.name}\n")
        if job.kind == BATCH_JOB:
            self._patch_status(job.api_version, "Job", job.namespace, job.name, {"ready": job.pod_count})
        elif job.kind == VCJOB:
            self._vcjob_phase(job, "Running", now, running=job.pod_count, pending=0)
        else:
            self._patch_status(job.api_version, "RayJob", job.namespace, job.name, {
                "jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
                "rayJobInfo": {"startTime": _iso(now)}})
        if job.backend == "volcano":
            self._patch_status(VOLCANO, "PodGroup", job.namespace, job.scheduler_object, {
                "phase": "Running", "running": job.pod_count, "conditions": [
                    {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
                     "message": "", "lastTransitionTime": _iso(now), "transitionID": str(job.seq)}]})

    def _release(self, job: Tracked) -> None:
        if job.key in self._active:
            self._charge(job, -1)
            self._active.pop(job.key, None)

    def _finish(self, job: Tracked, now: float, outcome: str, message: str = "") -> None:
        """The job ends: pods Succeeded/Failed, the job's own terminal status, the scheduler's record closed."""
        succeeded = outcome == "succeed"
        phase = "Succeeded" if succeeded else "Failed"
        explicit = message
        for pod in job.pods:
            if not pod:
                continue
            self._patch_status("v1", "Pod", job.namespace, pod, {"phase": phase, "conditions": [
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": _iso(now)}]})
            self.store.append_log(job.namespace, pod, f"{_iso(now)} exited with code {0 if succeeded else 1}\n")
        if outcome == "deadline":
            reason, message = "DeadlineExceeded", "Job was active longer than specified deadline"
        elif not succeeded:
            reason, message = "BackoffLimitExceeded", message or "Job has reached the specified backoff limit"
        else:
            reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
        count = job.pod_count
        if job.kind == BATCH_JOB:
            job_obj = self._get(job.api_version, "Job", job.namespace, job.name) or {}
            conditions = (job_obj.get("status") or {}).get("conditions") or []
            if succeeded:
                updates = [_condition("SuccessCriteriaMet", True, reason, message, now),
                           _condition("Complete", True, reason, message, now)]
                status = {"succeeded": count, "completionTime": _iso(now), "completedIndexes": f"0-{count - 1}"
                          if count > 1 else "0"}
            else:
                updates = [_condition("FailureTarget", True, reason, message, now),
                           _condition("Failed", True, reason, message, now)]
                status = {"failed": 1 if outcome != "deadline" else count}
            for update in updates:
                update.pop("observedGeneration")
            self._patch_status(job.api_version, "Job", job.namespace, job.name, {
                **status, "active": 0, "ready": 0, "conditions": _set_conditions(conditions, *updates)})
        elif job.kind == VCJOB:
            if not succeeded and outcome != "deadline":
                first = next((p for p in job.pods if p), job.name)
                reason, message = "PodFailed", explicit or f"pod {first} failed with exit code 1"
            self._vcjob_phase(job, "Completed" if succeeded else "Failed", now,
                              "" if succeeded else reason, "" if succeeded else message, running=0,
                              **({"succeeded": count} if succeeded else {"failed": count}))
        else:
            ray_reason = "" if succeeded else ("DeadlineExceeded" if outcome == "deadline" else "AppFailed")
            status = {"jobDeploymentStatus": "Complete" if succeeded or outcome != "deadline" else "Failed",
                      "jobStatus": "SUCCEEDED" if succeeded else "FAILED", "endTime": _iso(now),
                      "succeeded" if succeeded else "failed": 1}
            if ray_reason:
                status.update(reason=ray_reason, message=message)
            self._patch_status(job.api_version, "RayJob", job.namespace, job.name, status)
        if job.backend == "kueue":
            workload = self._get(KUEUE, "Workload", job.namespace, job.scheduler_object) or {}
            conditions = (workload.get("status") or {}).get("conditions") or []
            self._patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object, {
                "conditions": _set_conditions(conditions, _condition(
                    "Finished", True, "Succeeded" if succeeded else "Failed",
                    "Job finished successfully" if succeeded else message, now))})
        else:
            self._patch_status(VOLCANO, "PodGroup", job.namespace, job.scheduler_object,
                               {"phase": "Completed", "running": 0, "succeeded" if succeeded else "failed": count})
        self._release(job)
        self._forget(job, delete_children=False)
        self._finished[job.key] = job

    def _evict(self, job: Tracked, now: float, preemptor: Tracked | None, reason: str) -> None:
        """Preemption: the pods go, the job waits again (Kueue re-suspends it; Volcano restarts it)."""
        if preemptor is None:
            message = "Preempted on request (sandbox)"
            kueue_reason = "InClusterQueue"
            job.requeue_at = now + REQUEUE_AFTER_REQUESTED_PREEMPTION
        elif job.backend == "kueue":
            why = "prioritization in the ClusterQueue" if reason == "InClusterQueue" else \
                "reclamation within the cohort"
            message = f"Preempted to accommodate a workload (UID: {preemptor.scheduler_uid}, JobUID: " \
                      f"{preemptor.uid}) due to {why}"
            kueue_reason = reason
        else:
            message = f"Evicted by {reason} to schedule {preemptor.namespace}/{preemptor.name}"
        for pod in job.pods:
            if pod:
                self._delete("v1", "Pod", job.namespace, pod)
        job.pods, job.state, job.outcome = [], "pending", "succeed" if job.outcome == "preempt" else job.outcome
        self._release(job)
        self._pending[self._queue_id(job)][job.key] = job
        if job.backend == "kueue":
            workload = self._get(KUEUE, "Workload", job.namespace, job.scheduler_object) or {}
            conditions = (workload.get("status") or {}).get("conditions") or []
            updates = [_condition("Evicted", True, "Preempted", message, now),
                       _condition("Preempted", True, kueue_reason, message, now),
                       _condition("QuotaReserved", False, "Preempted", message, now),
                       _condition("Admitted", False, "NoReservation", "The workload has no reservation", now),
                       _condition("Requeued", True, "Preempted", message, now)]
            self._patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                               {"conditions": _set_conditions(conditions, *updates), "admission": None})
            self._patch(job.api_version, job.kind[1], job.namespace, job.name, {"spec": {"suspend": True}})
            if job.kind == BATCH_JOB:
                self._patch_status(job.api_version, "Job", job.namespace, job.name,
                                   {"active": 0, "ready": 0, "startTime": None})
            else:
                self._patch_status(job.api_version, "RayJob", job.namespace, job.name, {
                    "jobDeploymentStatus": "Suspended", "jobStatus": "", "startTime": None})
        else:
            job_obj = self._get(job.api_version, job.kind[1], job.namespace, job.name) or {}
            retries = ((job_obj.get("status") or {}).get("retryCount") or 0) + 1
            if job.kind == VCJOB:
                self._vcjob_phase(job, "Pending", now, "PodEvicted", message, running=0, pending=job.pod_count,
                                  retryCount=retries)
            else:
                self._patch_status(job.api_version, "RayJob", job.namespace, job.name, {
                    "jobDeploymentStatus": "Suspended", "jobStatus": "", "reason": "Preempted",
                    "message": message})
            self._patch_status(VOLCANO, "PodGroup", job.namespace, job.scheduler_object, {
                "phase": "Pending", "running": 0, "conditions": [
                    {"type": "Unschedulable", "status": "True", "reason": "Evicted", "message": message,
                     "lastTransitionTime": _iso(now), "transitionID": str(job.seq)}]})

    def _forget(self, job: Tracked, *, delete_children: bool) -> None:
        """Drop a job from the index; when the job object itself was deleted, garbage-collect what it owned."""
        self._release(job)
        self._pending[self._queue_id(job)].pop(job.key, None)
        if not self._pending[self._queue_id(job)]:
            self._pending.pop(self._queue_id(job), None)
        self._jobs.pop(job.key, None)
        if delete_children:
            for pod in job.pods:
                if pod:
                    self._delete("v1", "Pod", job.namespace, pod)
            if job.scheduler_object:
                kind = ("Workload", KUEUE) if job.backend == "kueue" else ("PodGroup", VOLCANO)
                self._delete(kind[1], kind[0], job.namespace, job.scheduler_object)

    # Restart ---------------------------------------------------------------------------------------------------

    def adopt(self, now: float | None = None) -> int:
        """Take over the jobs of a restored store (`--state`): finished ones are left alone, those with pods run
        on (their duration counts again from now), the rest wait for admission. Returns how many are driven."""
        now = self.clock() if now is None else now
        with self.store._lock, self._lock:
            self._drain(now)
            owned: dict[str, list[dict]] = defaultdict(list)
            for pod in self._list("v1", "Pod"):
                for ref in pod["metadata"].get("ownerReferences") or []:
                    owned[ref.get("uid", "")].append(pod)
            for kind in (BATCH_JOB, VCJOB, RAYJOB):
                rt = self._rt.get(kind)
                for obj in ([] if rt is None else self.store.list(rt)["items"]):
                    job = self._track(kind, obj, now)
                    if job is None or job.key in self._jobs:
                        continue
                    self._adopt_one(job, obj, owned.get(job.uid, []), now)
            return len(self._jobs)

    def _adopt_one(self, job: Tracked, obj: dict, pods: list[dict], now: float) -> None:
        status = obj.get("status") or {}
        done = (any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                    for c in status.get("conditions") or [])
                or (status.get("state") or {}).get("phase") in ("Completed", "Failed", "Aborted", "Terminated")
                or status.get("jobDeploymentStatus") in ("Complete", "Failed"))
        if job.backend == "kueue":
            job.scheduler_object = kueue_workload_name(job.kind[1], job.name, job.uid, job.api_version)
        else:
            job.scheduler_object = f"{job.name}-{job.uid}" if job.kind == VCJOB else f"ray-{job.name}-pg"
        if done:
            self._finished[job.key] = job
            return
        self._jobs[job.key] = job
        kind = ("Workload", KUEUE) if job.backend == "kueue" else ("PodGroup", VOLCANO)
        record = self._get(kind[1], kind[0], job.namespace, job.scheduler_object)
        job.scheduler_uid = (record or {}).get("metadata", {}).get("uid", "")
        live = [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")]
        if not live:
            self._pending[self._queue_id(job)][job.key] = job
            if record is None:
                self._create_scheduler_object(job, obj, now)
            return
        job.pods = [p["metadata"]["name"] for p in live]
        job.cluster_name = status.get("rayClusterName", "")
        running = all(p["status"]["phase"] == "Running" for p in live)
        job.state, job.admitted_at, job.running_at = ("running" if running else "starting"), now, now
        if job.backend == "kueue":
            admission = ((record or {}).get("status") or {}).get("admission") or {}
            job.cluster_queue = admission.get("clusterQueue", "")
            for assignment in admission.get("podSetAssignments") or []:
                job.flavors.update(assignment.get("flavors") or {})
        self._charge(job, +1)
        self._active[job.key] = job

    # Requests from tests and other processes -------------------------------------------------------------------

    def plan(self, namespace: str, name: str, *, duration: float | None = None, startup: float | None = None,
             outcome: str | None = None) -> dict:
        """Change how a tracked job runs: `duration`/`startup` in seconds from now on, and how it ends. A job that
        is running with `duration=0` ends at the next step."""
        if outcome is not None and outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}")
        for value, label in ((duration, "duration"), (startup, "startup")):
            if value is not None and (not isinstance(value, int | float) or value < 0):
                raise ValueError(f"{label} must be a number of seconds ≥ 0")
        with self.store._lock, self._lock:
            self._drain(self.clock())
            job = next((j for j in self._jobs.values() if j.namespace == namespace and j.name == name), None)
            if job is None:
                raise KeyError(f"no simulated job {namespace}/{name}")
            now = self.clock()
            if duration is not None:
                job.duration = (now - job.running_at + duration) if job.state == "running" else duration
            if startup is not None:
                job.startup = (now - job.admitted_at + startup) if job.state == "starting" else startup
            if outcome is not None:
                job.outcome = outcome
            return self.describe(job)

    @staticmethod
    def describe(job: Tracked) -> dict:
        return {"namespace": job.namespace, "name": job.name, "kind": job.kind[1], "backend": job.backend,
                "queue": job.queue, "state": job.state, "priority": job.priority, "duration": job.duration,
                "startup": job.startup, "outcome": job.outcome, "pods": [p for p in job.pods if p]}

    def jobs(self) -> list[dict]:
        with self._lock:
            return [self.describe(j) for j in self._jobs.values()]

    # Background ticker -----------------------------------------------------------------------------------------

    def start(self, interval: float = 0.25) -> Simulator:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(interval,), name="sandbox-simulator", daemon=True)
        self._thread.start()
        return self

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.step()
            except Exception:  # keep ticking for the other jobs, and say what went wrong
                traceback.print_exc()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._unsubscribe()
