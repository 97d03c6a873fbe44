"""The simulation's clock and events: it watches the store for jobs, keeps the index of those pending or running,
and on each `step(now)` moves them along through the scheduler that owns them (`kueue`, `volcano`), the status
writer of their kind (`workloads`) and the kubelet.

Time comes from `step(now)`: tests drive it with an explicit clock; `start()` runs a background ticker. Work per
step is proportional to the jobs that are pending or running, never to the history (finished jobs are dropped
from the index, usage is kept incrementally per queue).

Per job, from annotations or `plan()` (the `/_sandbox/jobs/...` endpoint): `duration-seconds` (how long it runs,
default `SANDBOX_JOB_DURATION_SECONDS` or 60), `startup-seconds` (pods Pending before Running, default
`SANDBOX_JOB_STARTUP_SECONDS` or 1), `outcome` (`succeed`, `fail` or `preempt` when the duration is up).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import traceback
from collections import defaultdict, deque

from ..store import ADDED, DELETED
from . import queue_status, volcano_discovery
from .dra import Devices
from .kubelet import Kubelet
from .kueue import Kueue
from .model import (
    BATCH_JOB,
    DURATION_ANNOTATION,
    OUTCOME_ANNOTATION,
    OUTCOMES,
    RAYJOB,
    STARTUP_ANNOTATION,
    VCJOB,
    Objects,
    Scheduler,
    Tracked,
)
from .volcano import Volcano
from .workloads import writers

REQUEUE_AFTER_REQUESTED_PREEMPTION = 3600.0
DISCOVERY_INPUTS = {("", "Node"), ("", "ConfigMap"), ("topology.volcano.sh", "HyperNode")}
DISCOVERY_CONFIG = (volcano_discovery.CONFIG_NAMESPACE, volcano_discovery.CONFIG_NAME)


class Simulator:
    def __init__(self, store, *, duration: float | None = None, startup: float | None = None,
                 clock=time.time, seed: int = 0, dra_nodes: int | None = None, dra_gpus_per_node: int = 8,
                 kueue_mappings: dict[str, str] | None = None, pods_ready_timeout: float | None = None):
        self.store = store
        self.clock = clock
        self.default_duration = float(duration if duration is not None
                                      else os.environ.get("SANDBOX_JOB_DURATION_SECONDS", 60))
        self.default_startup = float(startup if startup is not None
                                     else os.environ.get("SANDBOX_JOB_STARTUP_SECONDS", 1))
        # Kueue's waitForPodsReady timeout, on by default since v0.19 (30 minutes).
        self.pods_ready_timeout = float(pods_ready_timeout if pods_ready_timeout is not None
                                        else os.environ.get("SANDBOX_KUEUE_PODS_READY_TIMEOUT_SECONDS", 1800))
        self.objects = Objects(store)
        self.writers = writers(self.objects)
        self.devices = Devices(self.objects, seed=seed, gpus_per_node=dra_gpus_per_node, nodes=int(
            dra_nodes if dra_nodes is not None else os.environ.get("SANDBOX_DRA_NODES", 0)),
            kueue_mappings=kueue_mappings)
        self.kubelet = Kubelet(self.objects, self.writers, seed, devices=self.devices)
        self.schedulers: dict[str, Scheduler] = {s.backend: s for s in (Kueue(self), Volcano(self))}
        self._lock = threading.RLock()
        self._events: deque = deque()
        self._jobs: dict[tuple, Tracked] = {}
        self._pending: dict[str, dict[tuple, Tracked]] = defaultdict(dict)  # queue id -> pending jobs
        self._active: dict[tuple, Tracked] = {}
        self._finished: dict[tuple, Tracked] = {}  # ended jobs whose objects still exist, for garbage collection
        self._configs: dict[str, dict] = {}  # the schedulers' snapshots during a step
        self.step_cpu = 0.0
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._discover = True  # Nodes, HyperNodes or the Volcano controller's configuration changed
        # Whether anything the schedulers read may have changed since their last cycle (any write to the store, the
        # simulator's own included), and when the next requeued job comes due: without either, a cycle would decide
        # exactly what the last one did, so it is skipped. Kueue parks inadmissible workloads the same way until
        # something in their queue changes (pkg/queue/manager.go QueueInadmissibleWorkloads).
        self._inputs_changed = True
        self._requeue_due = float("inf")
        self._unsubscribe = store.subscribe(self._on_change)

    # Events ----------------------------------------------------------------------------------------------------

    def _on_change(self, event_type, rt, obj) -> None:
        """Runs under the store lock: only Kueue's webhook acts here (it suspends before anything can start), and
        only when Kueue is installed (its Workload kind is served); everything else waits for the next step."""
        self._inputs_changed = True
        if rt.key in DISCOVERY_INPUTS and (rt.key != ("", "ConfigMap") or (
                obj["metadata"].get("namespace"), obj["metadata"]["name"]) == DISCOVERY_CONFIG):
            self._discover = True
        if rt.key not in self.writers:
            return
        labels = obj["metadata"].get("labels") or {}
        kueue = self.schedulers["kueue"]
        if event_type == ADDED and kueue.claims(rt.key, labels, obj.get("spec") or {}) and not (
                obj.get("spec") or {}).get("suspend") and kueue.installed():
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
                job = self._track(kind, obj)
                if job is not None:
                    self._jobs[key] = job
                    self._pending[self._queue_id(job)][key] = job
                    self._create_record(job, obj, now)

    def _track(self, kind, obj) -> Tracked | None:
        """A job for an installed batch scheduler: Kueue by the queue-name label, Volcano for its own Job kind and
        for a RayJob labelled with a Volcano queue. Anything else nothing in this sandbox runs."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
        for scheduler in self.schedulers.values():
            queue = scheduler.claims(kind, labels, spec)
            if queue and scheduler.installed():
                break
        else:
            return None
        writer = self.writers[kind]
        priority, may_preempt = scheduler.priority(labels, writer.priority_class(labels, spec))
        pod_sets, refusal = self.devices.pod_sets(writer.pod_sets(spec), meta["namespace"], scheduler.backend)
        outcome = notes.get(OUTCOME_ANNOTATION)
        job = Tracked(
            kind=kind, api_version=obj["apiVersion"], namespace=meta["namespace"], name=meta["name"],
            uid=meta.get("uid", ""), backend=scheduler.backend, queue=queue, seq=next(self._seq),
            priority=priority, may_preempt=may_preempt, pod_sets=pod_sets,
            duration=float(notes.get(DURATION_ANNOTATION, self.default_duration)),
            startup=float(notes.get(STARTUP_ANNOTATION, self.default_startup)),
            outcome=outcome if outcome in OUTCOMES else "succeed", deadline=writer.deadline(spec),
            min_available=writer.min_available(spec), refusal=refusal,
            network_topology=dict(spec.get("networkTopology") or {}) if kind == VCJOB else {})
        job.scheduler_object = scheduler.record_name(job)
        return job

    def _create_record(self, job: Tracked, obj: dict, now: float) -> None:
        self.schedulers[job.backend].create_record(job, obj, now)
        self.writers[job.kind].created(job, now)

    def _queue_id(self, job: Tracked) -> str:
        return self.schedulers[job.backend].queue_id(job)

    # The step --------------------------------------------------------------------------------------------------

    def step(self, now: float | None = None) -> None:
        """One scheduling and kubelet cycle at time `now` (default: the clock)."""
        now = self.clock() if now is None else now
        with self.store._lock, self._lock:
            started = time.process_time()
            self._drain(now)
            if self._discover:
                self._discover = False
                volcano_discovery.reconcile(self.objects)
            self._progress(now)
            if any(self.schedulers["kueue"].admitted.values()):
                self.schedulers["kueue"].progress_checks(now)
                self.schedulers["kueue"].evict_lost_nodes(now)
                self.schedulers["kueue"].evict_not_ready(now)
            if any(self._pending.values()) and (self._inputs_changed or now >= self._requeue_due):
                self._schedule(now)
            if self.schedulers["kueue"].installed():
                self.schedulers["kueue"].sample_usage(now)
            queue_status.publish(self, now)
            self.step_cpu += time.process_time() - started

    def cpu(self) -> dict[str, float]:
        """CPU seconds of every step so far: in all, spent writing objects, and the schedulers' own share."""
        return {"steps": self.step_cpu, "writes": self.objects.write_cpu,
                "scheduling": self.step_cpu - self.objects.write_cpu}

    def next_event(self) -> float:
        """When a step would next change something by the clock alone: a job's start after its startup, its end
        (its duration or its deadline), a preempted job's requeue. A driver with its own clock steps there."""
        due = [self._requeue_due] if any(self._pending.values()) else []
        for job in self._active.values():
            if job.state == "starting":
                due.append(job.admitted_at + job.startup)
            elif job.state == "running":
                due.append(job.running_at + job.duration)
                if job.deadline is not None and job.deadline < job.duration:
                    due.append(job.admitted_at + job.deadline)
        return min(due, default=float("inf"))

    def _progress(self, now: float) -> None:
        for job in list(self._active.values()):
            if job.state == "starting" and now >= job.admitted_at + job.startup:
                self._set_running(job, now)
            if job.state == "running":
                if job.deadline is not None and job.deadline < job.duration and now - job.admitted_at >= \
                        job.deadline:
                    self._finish(job, now, "deadline")
                elif now - job.running_at >= job.duration:
                    if job.outcome == "preempt":
                        self.evict(job, now, "Preempted on request (sandbox)", reason="InClusterQueue")
                        job.requeue_at = now + REQUEUE_AFTER_REQUESTED_PREEMPTION
                    else:
                        self._finish(job, now, job.outcome)

    def _schedule(self, now: float) -> None:
        self._inputs_changed = False  # what this cycle writes sets it again: the next cycle sees the new usage
        pending = [j for jobs in self._pending.values() for j in jobs.values()]
        self._requeue_due = min((j.requeue_at for j in pending if j.requeue_at > now), default=float("inf"))
        waiting = sorted((j for j in pending if j.requeue_at <= now), key=lambda j: (-j.priority, j.seq))
        by_backend: dict[str, list[Tracked]] = defaultdict(list)
        for job in waiting:
            by_backend[job.backend].append(job)
        try:
            for backend, jobs in by_backend.items():
                scheduler = self.schedulers[backend]
                config = self._configs[backend] = scheduler.snapshot()
                for job in scheduler.order(jobs, config):
                    if job.key in self._jobs and job.state == "pending":
                        if job.refusal:  # counted again each cycle: a claim template may have come meanwhile
                            job.pod_sets, job.refusal = self.devices.pod_sets(job.pod_sets, job.namespace, backend)
                            if job.refusal and backend != "kueue":
                                continue
                        scheduler.schedule(job, config, now)
        finally:
            self._configs = {}

    # What schedulers call --------------------------------------------------------------------------------------

    def admit(self, job: Tracked, now: float, **placement) -> None:
        """The scheduler admitted the job: it is unsuspended (or its PodGroup enqueued) and its pods created."""
        self._take(job, now, placement)
        self._start(job, now)

    def reserve(self, job: Tracked, now: float, **placement) -> None:
        """Quota is reserved for the job, which is not admitted yet (Kueue's admission checks decide)."""
        self._take(job, now, placement)
        job.state = "reserved"
        self.schedulers[job.backend].reserved_status(job, now)

    def start_reserved(self, job: Tracked, now: float) -> None:
        self._start(job, now)

    def deactivate(self, job: Tracked) -> None:
        """The workload is deactivated: no reservation, and it is not considered again while inactive."""
        self._release(job)
        job.state = "inactive"

    def _take(self, job: Tracked, now: float, placement: dict) -> None:
        self._pending[self._queue_id(job)].pop(job.key, None)
        job.waiting, job.evicted = None, False
        for name, value in placement.items():
            setattr(job, name, value)
        self.schedulers[job.backend].charge(job, +1, self._configs.get(job.backend))
        self._active[job.key] = job

    def _start(self, job: Tracked, now: float) -> None:
        scheduler = self.schedulers[job.backend]
        job.state, job.admitted_at = "starting", now
        scheduler.admitted_status(job, now)
        if job.kind == RAYJOB and not job.cluster_name:
            job.cluster_name = f"{job.name}-{self.kubelet.suffix()}"
        failure = self.kubelet.create_pods(job, now)
        if failure:
            return self._finish(job, now, "fail", failure)
        self.writers[job.kind].admitted(job, now)

    def evict(self, job: Tracked, now: float, message: str, *, reason: str = "") -> None:
        """Preemption: the pods go and the job waits again (Kueue suspends it; Volcano restarts it)."""
        self.kubelet.delete(job)
        job.state, job.evicted = "pending", True
        if job.outcome == "preempt":
            job.outcome = "succeed"
        self._release(job)
        self._pending[self._queue_id(job)][job.key] = job
        self.schedulers[job.backend].evicted_status(job, now, message, reason)
        self.writers[job.kind].evicted(job, now, message)

    # Running, the end ------------------------------------------------------------------------------------------

    def _set_running(self, job: Tracked, now: float) -> None:
        job.state, job.running_at = "running", now
        self.kubelet.start(job, now)
        self.writers[job.kind].running(job, now)
        self.schedulers[job.backend].running_status(job, now)

    def _release(self, job: Tracked) -> None:
        if job.key in self._active:
            self.schedulers[job.backend].charge(job, -1, self._configs.get(job.backend))
            self._active.pop(job.key, None)

    def _finish(self, job: Tracked, now: float, outcome: str, message: str = "") -> None:
        """The job ends: pods Succeeded/Failed, the job's own terminal status, the scheduler's record closed."""
        succeeded = outcome == "succeed"
        self.kubelet.end(job, now, succeeded)
        self.writers[job.kind].finished(job, now, outcome, message)
        self.schedulers[job.backend].finished_status(job, now, succeeded, message or (
            "Job was active longer than specified deadline" if outcome == "deadline"
            else "Job has reached the specified backoff limit"))
        self._release(job)
        self._forget(job, delete_children=False)
        self._finished[job.key] = job

    def _forget(self, job: Tracked, *, delete_children: bool) -> None:
        """Drop a job from the index; when the job object itself was deleted, garbage-collect what it owned."""
        self._release(job)
        queue_id = self._queue_id(job)
        self._pending[queue_id].pop(job.key, None)
        if not self._pending[queue_id]:
            self._pending.pop(queue_id, None)
        self._jobs.pop(job.key, None)
        if delete_children:
            self.kubelet.delete(job)
            if job.scheduler_object:
                self.objects.delete(*self.schedulers[job.backend].record, job.namespace, job.scheduler_object)

    # Restart ---------------------------------------------------------------------------------------------------

    def adopt(self, now: float | None = None) -> int:
        """Take over the jobs of a restored store (`--state`): finished ones are left alone, those with pods run
        on (their duration counts again from now), the rest wait for admission. Returns how many are driven."""
        now = self.clock() if now is None else now
        with self.store._lock, self._lock:
            self._drain(now)
            for scheduler in self.schedulers.values():
                scheduler.prepare()
            self.devices.prepare()
            owned: dict[str, list[dict]] = defaultdict(list)
            for pod in self.objects.list("v1", "Pod"):
                for ref in pod["metadata"].get("ownerReferences") or []:
                    owned[ref.get("uid", "")].append(pod)
            for kind in (BATCH_JOB, VCJOB, RAYJOB):
                for obj in self.objects.list(*_api(kind)):
                    job = self._track(kind, obj)
                    if job is None or job.key in self._jobs:
                        continue
                    self._adopt_one(job, obj, owned.get(job.uid, []), now)
            return len(self._jobs)

    def _adopt_one(self, job: Tracked, obj: dict, pods: list[dict], now: float) -> None:
        status = obj.get("status") or {}
        if self.writers[job.kind].done(status):
            self._finished[job.key] = job
            return
        self._jobs[job.key] = job
        scheduler = self.schedulers[job.backend]
        record = self.objects.get(*scheduler.record, job.namespace, job.scheduler_object)
        job.scheduler_uid = (record or {}).get("metadata", {}).get("uid", "")
        live = [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")]
        if not live:
            self._pending[self._queue_id(job)][job.key] = job
            if record is None:
                self._create_record(job, obj, now)
            return
        job.pods = [p["metadata"]["name"] for p in live]
        job.nodes = [(p.get("spec") or {}).get("nodeName", "") for p in live]
        job.cluster_name = status.get("rayClusterName", "")
        running = all(p["status"]["phase"] == "Running" for p in live)
        job.state, job.admitted_at, job.running_at = ("running" if running else "starting"), now, now
        scheduler.adopt(job, record)
        scheduler.charge(job, +1)
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


def _api(kind: tuple[str, str]) -> tuple[str, str]:
    return {BATCH_JOB: ("batch/v1", "Job"), VCJOB: ("batch.volcano.sh/v1alpha1", "Job"),
            RAYJOB: ("ray.io/v1", "RayJob")}[kind]
