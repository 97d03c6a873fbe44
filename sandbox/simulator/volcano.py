"""Volcano v1.15's scheduler at its default configuration, for Volcano Jobs and RayJobs labelled with a Volcano
queue. The configuration is read, as upstream reads it, from the `volcano-scheduler.conf` key of the ConfigMap
`volcano-scheduler-configmap` in `volcano-system`; without one, upstream's default applies
(installer/helm/chart/volcano/config/volcano-scheduler.conf: actions "enqueue, allocate, backfill", no preempt
and no reclaim).

- enqueue (pkg/scheduler/actions/enqueue): a PodGroup goes Pending → Inqueue when the queue's plugins admit its
  minResources: proportion compares them plus the queue's allocation with the queue's real capability
  (capability, at most the cluster less the other queues' guarantees); capacity (when configured) with the
  queue's real capability, and with hierarchical queues each ancestor's (`volcano_capacity`); overcommit with
  1.2 × the cluster.
  A refusal is an Event on the PodGroup, not a condition ("queue resource quota insufficient: insufficient X").
- allocate with gang (pkg/scheduler/plugins/gang): the job runs once at least minAvailable pods can be placed,
  more as room allows; short of that the PodGroup says `Unschedulable`, reason `NotEnoughResources`,
  "N/M tasks in gang unschedulable: ...".
- preempt and reclaim only when the configuration lists them; the gang plugin then offers as victims only a
  job's pods above its minAvailable (preemptableFn), so a gang is never broken (`volcano_preemption`).
- with Nodes registered, each task goes to a node, and networkTopology keeps a gang within HyperNodes
  (`volcano_nodes`); without any, the cluster is what its queues are promised and tasks are not placed.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import yaml

from ..quantity import parse_quantity
from . import volcano_capacity, volcano_nodes, volcano_preemption, volcano_proportion
from .model import VCJOB, VOLCANO, Tracked, fmt, iso, owner, set_conditions

QUEUE_LABEL = "volcano.sh/queue-name"
CONFIG_NAMESPACE, CONFIG_NAME, CONFIG_KEY = "volcano-system", "volcano-scheduler-configmap", "volcano-scheduler.conf"
DEFAULT_CONF = {"actions": "enqueue, allocate, backfill", "tiers": [
    {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
    {"plugins": [{"name": "overcommit"}, {"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
                 {"name": "proportion"}, {"name": "nodeorder"}, {"name": "binpack"}]}]}
OVERCOMMIT_FACTOR = Decimal("1.2")  # plugins/overcommit defaultOverCommitFactor


class Volcano:
    backend = "volcano"
    record = (VOLCANO, "PodGroup")

    def __init__(self, sim):
        self.sim = sim
        self.objects = sim.objects
        self.usage: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        self.running: dict[str, dict[tuple, Tracked]] = defaultdict(dict)
        self.elastic: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        self.node_used: dict[str, dict[str, Decimal]] = {}  # per Node, what the pods placed there request
        self._conf: tuple[str, dict] = ("", {})  # the scheduler configuration's text, parsed

    def installed(self) -> bool:
        return self.objects.installed(*self.record)

    def prepare(self) -> None:
        """The scheduler creates the `root` and `default` queues when missing (cache.go newDefaultAndRootQueue)."""
        if not self.objects.installed(VOLCANO, "Queue"):
            return
        for name, reclaimable in (("root", False), ("default", True)):
            if self.objects.get(VOLCANO, "Queue", None, name) is None:
                self.objects.create({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name},
                                     "spec": {"reclaimable": reclaimable, "weight": 1}})

    def claims(self, kind, labels: dict, spec: dict) -> str:
        if kind == VCJOB:
            return spec.get("queue") or "default"
        return labels.get(QUEUE_LABEL, "") if kind == ("ray.io", "RayJob") else ""

    def priority(self, labels: dict, priority_class: str) -> tuple[int, bool]:
        """The PriorityClass; one with preemptionPolicy Never may not preempt."""
        pc = (self.objects.get("scheduling.k8s.io/v1", "PriorityClass", None, priority_class) if priority_class
              else None) or {}
        return int(pc.get("value", 0)), pc.get("preemptionPolicy") != "Never"

    def queue_id(self, job: Tracked) -> str:
        return f"vq/{job.queue}"

    def record_name(self, job: Tracked) -> str:
        # vcjob: `<job>-<uid>` (pkg/controllers/job GeneratePodgroupName); KubeRay: `ray-<job>-pg`.
        return f"{job.name}-{job.uid}" if job.kind == VCJOB else f"ray-{job.name}-pg"

    @staticmethod
    def min_count(job: Tracked) -> int:
        """PodGroup minMember: the vcjob's minAvailable; for a RayJob KubeRay's head + workers (without the
        submitter, ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go)."""
        return job.min_available or sum(p.count for p in job.pod_sets if p.creates_pods)

    @staticmethod
    def _pods(job: Tracked, count: int | None = None) -> list:
        """The job's pods in creation order (tasks in order), the quota-only submitter last."""
        pods = [p for p in job.pod_sets if p.creates_pods for _ in range(p.count)]
        extra = [p for p in job.pod_sets if not p.creates_pods for _ in range(p.count)]
        return (pods if count is None else pods[:count]) + extra

    pods_of = _pods

    @staticmethod
    def _sum(pod_sets) -> dict[str, Decimal]:
        total: dict[str, Decimal] = defaultdict(Decimal)
        for resource, value in ((r, v) for pod_set in pod_sets for r, v in pod_set.requests.items()):
            total[resource] += value
        return total

    def min_resources(self, job: Tracked) -> dict[str, Decimal]:
        return self._sum(self._pods(job, self.min_count(job)))

    def create_record(self, job: Tracked, obj: dict, now: float) -> None:
        spec = {"minMember": self.min_count(job), "queue": job.queue,
                "minResources": {k: fmt(v) for k, v in sorted(self.min_resources(job).items()) if v},
                "minTaskMember": {p.name: (p.min_count if p.min_count is not None else p.count)
                                  for p in job.pod_sets if p.creates_pods}}
        pc = (obj.get("spec") or {}).get("priorityClassName")
        if pc:
            spec["priorityClassName"] = pc
        if job.network_topology:  # the job controller copies it (pkg/controllers/job/job_controller_actions.go)
            spec["networkTopology"] = dict(job.network_topology)
        created, refusal = self.objects.create_refusable({
            "apiVersion": VOLCANO, "kind": "PodGroup",
            "metadata": {"name": job.scheduler_object, "namespace": job.namespace,
                         "annotations": {"volcano.sh/job-name": job.name} if job.kind == VCJOB else {},
                         "ownerReferences": [owner(job)]}, "spec": spec})
        if refusal and refusal != job.record_refused and job.kind == VCJOB:  # job_controller_actions.go; KubeRay logs
            involved = {k: v for k, v in owner(job).items() if k in ("apiVersion", "kind", "name", "uid")}
            self.objects.event(involved | {"namespace": job.namespace}, "PodGroupError", "Failed to create PodGroup, "
                               f"err: {refusal}", self.sim.clock(), "vc-controller-manager", "Warning")
        job.record_refused = refusal
        if not refusal:
            job.scheduler_uid = (created or {}).get("metadata", {}).get("uid", job.scheduler_uid)
            self._podgroup(job, {"phase": "Pending"})

    # Configuration ---------------------------------------------------------------------------------------------

    def snapshot(self) -> dict:
        self.prepare()
        conf = DEFAULT_CONF
        cm = self.objects.get("v1", "ConfigMap", CONFIG_NAMESPACE, CONFIG_NAME)
        text = ((cm or {}).get("data") or {}).get(CONFIG_KEY)
        if text:  # parsed once per text: every scheduling cycle reads it
            if self._conf[0] != text:
                self._conf = (text, yaml.safe_load(text) or {})
            conf = self._conf[1]
        actions = [a.strip() for a in str(conf.get("actions", "")).split(",") if a.strip()]
        plugins = {p.get("name"): p for tier in conf.get("tiers") or [] for p in tier.get("plugins") or []}
        queues = {}
        for q in self.objects.list(VOLCANO, "Queue"):
            spec = q.get("spec") or {}
            queues[q["metadata"]["name"]] = {
                "capability": _amounts(spec.get("capability")), "deserved": _amounts(spec.get("deserved")),
                "guarantee": _amounts((spec.get("guarantee") or {}).get("resource")),
                "reclaimable": spec.get("reclaimable", True), "parent": spec.get("parent", ""), "leaf": True,
                "open": ((q.get("status") or {}).get("state") or "Open") == "Open",
                "priority": int(spec.get("priority") or 0)}
        for q in queues.values():
            if q["parent"] in queues:
                queues[q["parent"]]["leaf"] = False
        capacity: dict[str, Decimal] = defaultdict(Decimal)
        cluster = volcano_nodes.snapshot(self.objects)
        for node in (cluster.get("nodes") or {}).values():
            for k, v in node["allocatable"].items():
                capacity[k] += v
        if not cluster:  # no Nodes: the cluster holds what its leaf queues are promised
            for name, q in queues.items():
                if q["leaf"] and name not in ("root", "default"):
                    for k, v in q["deserved"].items():
                        capacity[k] += v
        guarantees: dict[str, Decimal] = defaultdict(Decimal)
        for q in queues.values():  # a parent's guarantee is its children's: counted once, at the leaves
            for k, v in (q["guarantee"] if q["leaf"] else {}).items():
                guarantees[k] += v
        volcano_proportion.deal(self, queues, capacity, plugins)  # with proportion alone: deserved by weight
        hierarchy = bool((plugins.get("capacity") or {}).get("enableHierarchy"))
        real = {} if "capacity" not in plugins else volcano_capacity.real_capabilities(queues, capacity,
                                                                                      hierarchy=hierarchy)
        return {"actions": actions, "plugins": plugins, "tiers": conf.get("tiers") or [], "queues": queues,
                "capacity": dict(capacity), "guarantees": guarantees, "cluster": cluster, "real": real}

    # Scheduling ------------------------------------------------------------------------------------------------

    def order(self, jobs: list[Tracked], config: dict):
        """Jobs come by priority then creation (the priority plugin's JobOrderFn, then FIFO). With the capacity
        plugin, enqueue and allocate take them queue by queue: each time the queue first in the capacity plugin's
        QueueOrderFn (its priority, then the lowest share, allocated over deserved, compared at the level where two
        queues' ancestors part), then that queue's next job; shares move as jobs are allocated."""
        if "capacity" not in config["plugins"]:
            return jobs
        return self._by_share(jobs, config)

    def _by_share(self, jobs: list[Tracked], config: dict):
        by_queue: dict[str, list[Tracked]] = defaultdict(list)
        for job in jobs:
            by_queue[job.queue].append(job)
        place = {job.key: i for i, job in enumerate(jobs)}
        while by_queue:
            name = min(by_queue, key=lambda q: (self._queue_key(q, config), place[by_queue[q][0].key]))
            job = by_queue[name].pop(0)
            if not by_queue[name]:
                del by_queue[name]
            yield job

    def _queue_key(self, name: str, config: dict) -> tuple:
        """capacity.go QueueOrderFn: the queue's priority first, then its share, compared between the two queues'
        ancestors just below the one they share (compareShareWithDeserved: a queue with a deserved share first on
        a tie; a tie otherwise goes to the job first in order)."""
        queues, path, seen = config["queues"], [], set()
        while name in queues and name not in seen and name != "root":
            seen.add(name)
            path.append(name)
            name = queues[name]["parent"] or "root"
        levels = tuple((self._share(q, config), not queues[q]["deserved"]) for q in reversed(path))
        return (-queues[path[0]]["priority"] if path else 0, levels)

    def _share(self, name: str, config: dict) -> float:
        """updateQueueAttrShare: the largest allocated / deserved over the deserved resources; 1 without any."""
        deserved = {k: v for k, v in config["queues"][name]["deserved"].items() if v}
        if not deserved:
            return 1.0
        allocated = self._allocated(name, config)
        return max(float(allocated.get(k, 0) / v) for k, v in deserved.items())

    def schedule(self, job: Tracked, config: dict, now: float) -> None:
        if job.record_refused:  # no PodGroup, nothing for the scheduler to see: the controller tries again
            self.create_record(job, self.objects.get(job.api_version, job.kind[1], job.namespace, job.name) or {}, now)
            if job.record_refused:
                return None
        queue = config["queues"].get(job.queue)
        if queue is None or not queue["leaf"] or not queue["open"]:
            return self._refused(job, now, f"queue {job.queue} is not an open leaf queue")
        if "enqueue" in config["actions"] and not job.enqueued:
            refusal = self._enqueue_refusal(job, config)
            if refusal:
                return self._refused(job, now, refusal)
            job.enqueued = True
            self._podgroup(job, {"phase": "Inqueue"})
        count, nodes = self.plan(job, config)
        if count < self.min_count(job):
            victims = volcano_preemption.victims(self, job, config) if job.may_preempt else []
            if not victims:
                return self._gang_unschedulable(job, now)
            for victim, taken in victims:
                volcano_preemption.shrink(self, victim, taken, now, job)
            count, nodes = self.plan(job, config)
            if count < self.min_count(job):
                return self._gang_unschedulable(job, now)
        job.limit, job.nodes = count, nodes
        self.sim.admit(job, now)

    def _real_capability(self, name: str, config: dict) -> dict[str, Decimal]:
        """proportion: min(capability, the cluster less every queue's guarantee plus this queue's own)."""
        queue = config["queues"][name]
        real = {k: max(Decimal(0), v - config["guarantees"].get(k, Decimal(0))) + queue["guarantee"].get(k, 0)
                for k, v in config["capacity"].items()}
        for k, v in queue["capability"].items():
            real[k] = min(real.get(k, v), v)
        return real

    def _limits(self, name: str, config: dict) -> list[tuple[str, dict]]:
        """The bounds a queue's allocation must respect: proportion's real capability, or the capacity plugin's
        (`volcano_capacity`), with hierarchical queues of the queue and every ancestor."""
        if "capacity" in config["plugins"]:
            real, bounds, seen = config["real"], [], set()
            while name in config["queues"] and name not in seen:
                seen.add(name)
                bounds.append((name, real.get(name, config["queues"][name]["capability"])))
                if not config["plugins"]["capacity"].get("enableHierarchy"):
                    break
                name = config["queues"][name]["parent"]
            return bounds
        return [(name, self._real_capability(name, config))]

    def _allocated(self, name: str, config: dict) -> dict[str, Decimal]:
        if "capacity" not in config["plugins"]:
            return self.usage[name]
        total: dict[str, Decimal] = defaultdict(Decimal)
        for queue, usage in self.usage.items():
            node, seen = queue, set()
            while node in config["queues"] and node not in seen:
                seen.add(node)
                if node == name:
                    for k, v in usage.items():
                        total[k] += v
                    break
                node = config["queues"][node]["parent"]
        return total

    def _enqueue_refusal(self, job: Tracked, config: dict) -> str:
        need = {k: v for k, v in self.min_resources(job).items() if v}
        for name, bound in self._limits(job.queue, config):
            allocated = self._allocated(name, config)
            # proportion counts allocation less the queue's elastic part: pods running above their gang minimum
            elastic = self._elastic(job.queue) if name == job.queue else {}
            short = sorted(k for k, v in need.items()
                           if k in bound and allocated.get(k, 0) - elastic.get(k, 0) + v > bound[k])
            if short:
                return "queue resource quota insufficient: " + ", ".join(f"insufficient {k}" for k in short)
        if "overcommit" in config["plugins"]:
            used = self._cluster_used()
            over = sorted(k for k, v in need.items() if k in config["capacity"]
                          and used.get(k, 0) + v > config["capacity"][k] * OVERCOMMIT_FACTOR)
            if over:
                return "resource in cluster is overused: " + ", ".join(f"overused {k}" for k in over)
        return ""

    def _elastic(self, queue: str) -> dict[str, Decimal]:
        return self.elastic[queue]  # what the queue's jobs hold above their gang minimum, kept by `charge`

    def _cluster_used(self) -> dict[str, Decimal]:
        used: dict[str, Decimal] = defaultdict(Decimal)
        for usage in self.usage.values():
            for k, v in usage.items():
                used[k] += v
        return used

    def plan(self, job: Tracked, config: dict) -> tuple[int, list[str]]:
        """How many of the job's pods allocate would place now, and on which nodes (with Nodes registered): each
        pod must fit its queue's bounds and the cluster, in order, and then a node (`volcano_nodes.place`)."""
        used = self._cluster_used()
        bounds = [(self._allocated(name, config), bound) for name, bound in self._limits(job.queue, config)]
        taken: dict[str, Decimal] = defaultdict(Decimal)
        admitted = []
        for pod_set in self._pods(job):
            fits = all(used.get(k, 0) + taken[k] + v <= config["capacity"][k]
                       for k, v in pod_set.requests.items() if v and k in config["capacity"])
            fits = fits and all(allocated.get(k, 0) + taken[k] + v <= bound[k] for allocated, bound in bounds
                                for k, v in pod_set.requests.items() if v and k in bound)
            if not fits:
                break
            for k, v in pod_set.requests.items():
                taken[k] += v
            admitted.append(pod_set)
        creating = [p for p in admitted if p.creates_pods]
        if not config["cluster"]:
            return len(creating), []
        nodes = volcano_nodes.place(config["cluster"], self.node_used, creating, self.min_count(job),
                                    job.network_topology)
        return len(nodes), nodes

    # Usage -----------------------------------------------------------------------------------------------------

    def charge(self, job: Tracked, sign: int, config: dict | None = None) -> None:
        pods = self._pods(job, job.limit)
        for resource, value in self._sum(pods).items():
            self.usage[job.queue][resource] += sign * value
        for resource, value in self._sum(pods[self.min_count(job):]).items():
            self.elastic[job.queue][resource] += sign * value
        volcano_nodes.charge(self.node_used, job.nodes, [p for p in pods if p.creates_pods], sign)
        if sign > 0:
            self.running[job.queue][job.key] = job
        else:
            self.running[job.queue].pop(job.key, None)

    # The PodGroup's status --------------------------------------------------------------------------------------

    def _podgroup(self, job: Tracked, status: dict) -> None:
        self.objects.patch_status(VOLCANO, "PodGroup", job.namespace, job.scheduler_object, status)

    def _refused(self, job: Tracked, now: float, message: str) -> None:
        """Enqueue refused: the PodGroup stays Pending; the plugin's reason is a Normal Event on it, written once.
        The scheduler's cache then records every session a Warning Event, same reason, for any PodGroup still
        Pending or Inqueue (pkg/scheduler/cache/cache.go RecordJobStatusEvent): no task exists yet."""
        if job.waiting == ("Unschedulable", message):
            return
        job.waiting = ("Unschedulable", message)
        self._event(job, now, message)
        self._event(job, now, f"0/0 tasks in gang unschedulable: pod group is not ready, {self.min_count(job)} "
                              f"minAvailable", "Warning")

    def _event(self, job: Tracked, now: float, message: str, type_: str = "Normal") -> None:
        self.objects.event({"apiVersion": VOLCANO, "kind": "PodGroup", "name": job.scheduler_object,
                            "namespace": job.namespace, "uid": job.scheduler_uid}, "Unschedulable", message, now,
                           "volcano", type_)

    def _gang_unschedulable(self, job: Tracked, now: float) -> None:
        """gang.OnSessionClose for a job short of minAvailable (FitError's histogram), and the cache's Warning
        Event beside it (RecordJobStatusEvent: pending tasks of all tasks)."""
        tasks, minimum = sum(p.count for p in job.pod_sets if p.creates_pods), self.min_count(job)
        why = f"pod group is not ready, {tasks} Pending, {minimum} minAvailable; Pending: {tasks} Unschedulable"
        message = f"{minimum}/{tasks} tasks in gang unschedulable: {why}"
        if job.waiting == ("NotEnoughResources", message):
            return
        job.waiting = ("NotEnoughResources", message)
        conditions = self.objects.conditions(VOLCANO, "PodGroup", job.namespace, job.scheduler_object)
        self._podgroup(job, {"conditions": set_conditions(conditions, {
            "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": message,
            "lastTransitionTime": iso(now), "transitionID": str(job.seq)})})
        self._event(job, now, f"{tasks}/{tasks} tasks in gang unschedulable: {why}", "Warning")

    def admitted_status(self, job: Tracked, now: float) -> None:
        """Allocated at least minAvailable pods: the gang is ready, and gang.go OnSessionClose says so with a
        `Scheduled` condition. An Unschedulable one written before stays as it was, still True: the scheduler
        replaces conditions by type and removes none (framework/session.go UpdatePodGroupCondition)."""
        conditions = self.objects.conditions(VOLCANO, "PodGroup", job.namespace, job.scheduler_object)
        self._podgroup(job, {"phase": "Inqueue", "conditions": set_conditions(conditions, self._scheduled(job, now))})

    def running_status(self, job: Tracked, now: float) -> None:
        """Running once minMember pods run (framework/session.go getPodGroupPhase)."""
        conditions = self.objects.conditions(VOLCANO, "PodGroup", job.namespace, job.scheduler_object)
        self._podgroup(job, {"phase": "Running", "running": len(job.pods),
                             "conditions": set_conditions(conditions, self._scheduled(job, now))})

    @staticmethod
    def _scheduled(job: Tracked, now: float) -> dict:
        return {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
                "message": "", "lastTransitionTime": iso(now), "transitionID": str(job.seq)}

    def finished_status(self, job: Tracked, now: float, succeeded: bool, message: str) -> None:
        self._podgroup(job, {"phase": "Completed", "running": 0,
                             "succeeded" if succeeded else "failed": len(job.pods) or job.pod_count})

    def evicted_status(self, job: Tracked, now: float, message: str, reason: str) -> None:
        """The job controller restarting a vcjob deletes its PodGroup and makes it anew (pkg/controllers/job
        job_controller_actions.go killPods, createOrUpdatePodGroup): Pending, without the old conditions."""
        job.enqueued, job.nodes, job.waiting = False, [], None
        self._podgroup(job, {"phase": "Pending", "running": 0,
                             **({"conditions": None} if job.kind == VCJOB else {})})

    def adopt(self, job: Tracked, record: dict | None) -> None:
        job.enqueued = True
        job.limit = len(job.pods)


def _amounts(values) -> dict[str, Decimal]:
    return {k: parse_quantity(v) for k, v in (values or {}).items()}

