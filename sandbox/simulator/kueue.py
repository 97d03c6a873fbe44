"""Kueue v0.19's scheduler at its defaults, for batch/v1 Jobs and RayJobs labelled with a LocalQueue.

Sources (kubernetes-sigs/kueue): the webhook suspends a queued job and the job reconciler makes a Workload
(pkg/controller/jobframework); the scheduler admits the heads of its ClusterQueues by priority then creation
(BestEffortFIFO: a workload that does not fit does not block the next, pkg/scheduler/scheduler.go); flavors are
assigned per pod set and per resource group with the default flavor fungibility (whenCanBorrow MayStopSearch,
whenCanPreempt TryNextFlavor: pkg/scheduler/flavorassigner/flavorassigner.go); quota comes from the cohort tree
(`quota_tree`); preemption is the classical one (`kueue_preemption`).
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from ..selectors import matches_label_selector
from . import kueue_admission_fair_sharing as afs
from . import kueue_checks as checks
from . import kueue_fair_sharing as fair
from . import kueue_status, kueue_tas, quota_tree
from .kueue_preemption import find_targets, preempted_message
from .model import KUEUE, Tracked, condition, fmt, kueue_workload_name, owner, set_conditions
from .quota_tree import Quota

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
FIT, PREEMPT, NOFIT = 2, 1, 0


class Kueue:
    backend = "kueue"
    record = (KUEUE, "Workload")

    def __init__(self, sim):
        self.sim = sim
        self.objects = sim.objects
        self.usage: dict[str, dict[tuple[str, str], Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        self.admitted: dict[str, dict[tuple, Tracked]] = defaultdict(dict)  # ClusterQueue -> its workloads
        self.node_usage: dict[str, dict[str, Decimal]] = {}  # what TAS placements hold on each node
        self.checked: set[tuple] = set()  # workloads given admission check entries
        self.ledger = afs.Ledger()  # admission fair sharing's decayed usage per LocalQueue
        self._afs: tuple[str, dict | None] = ("", None)  # the Configuration's settings, by its resourceVersion

    def installed(self) -> bool:
        return self.objects.installed(*self.record)

    def prepare(self) -> None:
        """Nothing to create at start."""

    def claims(self, kind, labels: dict, spec: dict) -> str:
        return labels.get(QUEUE_LABEL, "") if kind != ("batch.volcano.sh", "Job") else ""

    def priority(self, labels: dict, priority_class: str) -> tuple[int, bool]:
        """The WorkloadPriorityClass named by the label, else the pods' PriorityClass (pkg/util/priority)."""
        if labels.get(PRIORITY_LABEL):
            wpc = self.objects.get(KUEUE, "WorkloadPriorityClass", None, labels[PRIORITY_LABEL])
            return (int(wpc.get("value", 0)) if wpc else 0), True
        pc = self.objects.get("scheduling.k8s.io/v1", "PriorityClass", None, priority_class) if priority_class \
            else None
        return (int(pc.get("value", 0)) if pc else 0), True

    def queue_id(self, job: Tracked) -> str:
        return f"lq/{job.namespace}/{job.queue}"

    def record_name(self, job: Tracked) -> str:
        return kueue_workload_name(job.kind[1], job.name, job.uid, job.api_version)

    def create_record(self, job: Tracked, obj: dict, now: float) -> None:
        labels = obj["metadata"].get("labels") or {}
        spec = {"queueName": job.queue, "priority": job.priority, "active": True,
                "podSets": [{"name": p.name, "count": p.count, "template": p.template} for p in job.pod_sets]}
        if labels.get(PRIORITY_LABEL):
            spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                        "name": labels[PRIORITY_LABEL]}
        created = self.objects.create({
            "apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": job.scheduler_object, "namespace": job.namespace,
                         "labels": {"kueue.x-k8s.io/job-uid": job.uid}, "ownerReferences": [owner(job)]},
            "spec": spec})
        job.scheduler_uid = (created or {}).get("metadata", {}).get("uid", job.scheduler_uid)
        # The job reconciler's first word on a workload with waitForPodsReady on (pkg/controller/jobframework
        # reconciler.go generatePodsReadyCondition): not admitted, so its pods are not ready.
        self.objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                                  {"conditions": [kueue_status.pods_not_ready(now)]})

    # Configuration ---------------------------------------------------------------------------------------------

    def snapshot(self) -> dict:
        """ClusterQueues, Cohorts, LocalQueues, ResourceFlavors and the quota tree with today's usage. Few objects,
        read once per step so quota changes apply at once."""
        queues, specs = {}, {}
        for cq in self.objects.list(KUEUE, "ClusterQueue"):
            spec = cq.get("spec") or {}
            groups, quotas = [], {}
            for group in spec.get("resourceGroups") or []:
                flavors = [flavor["name"] for flavor in group.get("flavors") or []]
                for flavor in group.get("flavors") or []:
                    for resource in flavor.get("resources") or []:
                        quotas[(flavor["name"], resource["name"])] = quota_tree.quota_from(resource)
                groups.append((list(group.get("coveredResources") or []), flavors))
            name = cq["metadata"]["name"]
            specs[name] = {"cohort": spec.get("cohortName", ""), "quotas": quotas}
            queues[name] = {"groups": groups, "namespaces": spec.get("namespaceSelector"), "weight": fair.weight(spec),
                            "preemption": spec.get("preemption") or {},
                            "admission_mode": (spec.get("admissionScope") or {}).get("admissionMode", ""),
                            "stopped": spec.get("stopPolicy", "None") != "None", "checks": checks.listed(spec)}
            queues[name]["inactive_checks"] = checks.inactive(self.objects, queues[name]["checks"]) \
                if queues[name]["checks"] else []
        cohorts, declared = {}, [cq.get("spec") or {} for cq in self.objects.list(KUEUE, "ClusterQueue")]
        for cohort in self.objects.list(KUEUE, "Cohort"):
            declared.append(cohort.get("spec") or {})
            spec = cohort.get("spec") or {}
            quotas = {(flavor["name"], resource["name"]): quota_tree.quota_from(resource)
                      for group in spec.get("resourceGroups") or [] for flavor in group.get("flavors") or []
                      for resource in flavor.get("resources") or []}
            cohorts[cohort["metadata"]["name"]] = {"parent": spec.get("parentName", ""), "quotas": quotas,
                                                   "weight": fair.weight(spec)}
        nodes = quota_tree.build(specs, cohorts)
        for name, usage in self.usage.items():
            if name in nodes:
                for fr, value in usage.items():
                    if value:
                        quota_tree.add_usage(nodes[name], fr, value)
        local = {(lq["metadata"]["namespace"], lq["metadata"]["name"]): lq.get("spec") or {}
                 for lq in self.objects.list(KUEUE, "LocalQueue")}
        flavors = {rf["metadata"]["name"]: (rf.get("spec") or {}).get("nodeLabels") or {}
                   for rf in self.objects.list(KUEUE, "ResourceFlavor")}
        return {"cq": queues, "nodes": nodes, "lq": local, "rf": flavors, "ns": {}, "fair": fair.enabled(declared),
                "cohort_weights": {name: cohort["weight"] for name, cohort in cohorts.items()},
                "afs": self.fair_sharing_settings(),
                "tas": kueue_tas.snapshot(self.objects)}

    # Scheduling ------------------------------------------------------------------------------------------------

    def order(self, jobs: list[Tracked], config: dict) -> list[Tracked]:
        """The cycle's order (scheduler.go, the classical iterator): workloads that can get quota first, then
        those that need no borrowing, then higher priority, then first come (`jobs` arrive by priority and
        creation, and the sort is stable)."""
        def key(job: Tracked):
            if self._blocker(job, config):
                return (1, 0)
            cq_name = config["lq"][(job.namespace, job.queue)]["clusterQueue"]
            node = config["nodes"][cq_name]
            flavors, _, _ = self.assign(job, config["cq"][cq_name], node, config)
            if flavors is None:
                return (1, 0)
            borrows = any(quota_tree.borrowing_with(node, fr, value)
                          for fr, value in self._requests(job, flavors).items())
            return (0, int(borrows))

        jobs = afs.reorder(jobs, config, self.ledger, config["afs"])
        return self._fair_order(jobs, config) if config["fair"] else sorted(jobs, key=key)

    def _fair_order(self, jobs: list[Tracked], config: dict):
        """With fair sharing, the next workload is decided one at a time (shares move as each is admitted) by the
        tournament of kueue_fair_sharing; workloads that cannot get quota now follow, in order."""
        remaining = list(jobs)  # by priority, then first come: the tie-breaks
        while remaining:
            entries = {}
            for index, job in enumerate(remaining):
                if self._blocker(job, config):
                    continue
                cq_name = config["lq"][(job.namespace, job.queue)]["clusterQueue"]
                flavors, _, _ = self.assign(job, config["cq"][cq_name], config["nodes"][cq_name], config)
                if flavors is not None:
                    entries[index] = (cq_name, self._requests(job, flavors))
            if not entries:
                yield from remaining
                return
            yield remaining.pop(fair.next_entry(entries, config))

    def schedule(self, job: Tracked, config: dict, now: float) -> None:
        lq = config["lq"].get((job.namespace, job.queue)) or {}
        listed = (config["cq"].get(lq.get("clusterQueue", "")) or {}).get("checks")
        entries = []
        if listed or (listed is not None and job.key in self.checked):  # the workload controller's sync
            entries = checks.sync(self.objects, job, listed, now)
            (self.checked.add if entries else self.checked.discard)(job.key)
        blocked = ("Inadmissible", job.refusal) if job.refusal else self._blocker(job, config)
        if blocked:
            return self.pending(job, *blocked, now)
        cq_name = config["lq"][(job.namespace, job.queue)]["clusterQueue"]
        node = config["nodes"][cq_name]
        flavors, modes, message = self.assign(job, config["cq"][cq_name], node, config)
        if flavors is None:
            return self.pending(job, "Pending", message, now)
        if PREEMPT in modes.values():
            requests = self._requests(job, flavors)
            frs = {fr for fr, mode in modes.items() if mode == PREEMPT}
            targets = find_targets(job, cq_name, config, frs, requests, self.admitted)
            if not targets:
                return self.pending(job, "Pending", message, now)
            for victim, reason in targets:
                path = config["nodes"][victim.cluster_queue].path()
                self.sim.evict(victim, now, preempted_message(job, reason, node.path(), path),
                               reason=reason)
            # The preemptor waits for its victims to go and is admitted in a later cycle; what they free is held
            # for it meanwhile (scheduler.go: cq.AddUsage then issuePreemptions, markPreemptionOutcome's words).
            for fr, value in requests.items():
                quota_tree.add_usage(node, fr, value)
            return self.pending(job, "Pending", f"{message}. Pending the preemption of {len(targets)} workload(s)",
                                now)
        if not checks.all_ready(entries):  # quota reserved; admitted once every check is Ready
            return self.sim.reserve(job, now, cluster_queue=cq_name, flavors=flavors)
        self.sim.admit(job, now, cluster_queue=cq_name, flavors=flavors)
        if config["afs"] is not None and config["cq"][cq_name]["admission_mode"] == afs.USAGE_BASED:
            by_resource: dict[str, Decimal] = defaultdict(Decimal)
            for (_, resource), value in self._requests(job, flavors).items():
                by_resource[resource] += value
            self.ledger.admit((job.namespace, job.queue), by_resource, config["afs"])

    def _blocker(self, job: Tracked, config: dict) -> tuple[str, str] | None:
        """Why the workload is not considered at all. A missing or stopped queue is the workload controller's
        finding (workload_controller.go getQueueBlocker, written by resolveLegacyUnadmittedQuotaReservedCondition
        with reason Inadmissible while UnadmittedWorkloadsObservability is off, its v0.19 default): a stopped
        LocalQueue is "inactive", and so is a stopped ClusterQueue or one naming a missing ResourceFlavor. A
        namespace the ClusterQueue does not select is the scheduler's (scheduler.go nominate), reason Pending."""
        lq = config["lq"].get((job.namespace, job.queue))
        if lq is None:
            return "Inadmissible", f"LocalQueue {job.queue} doesn't exist"
        if lq.get("stopPolicy", "None") != "None":
            return "Inadmissible", f"LocalQueue {job.queue} is inactive"
        cq_name = lq.get("clusterQueue", "")
        cq = config["cq"].get(cq_name)
        if cq is None:
            return "Inadmissible", f"ClusterQueue {cq_name} doesn't exist"
        if cq["stopped"] or cq["inactive_checks"] or any(f not in config["rf"] for _, flavors in cq["groups"]
                                                         for f in flavors):
            return "Inadmissible", f"ClusterQueue {cq_name} is inactive"
        if not self._namespace_matches(job.namespace, cq["namespaces"], config):
            return "Pending", "workload namespace doesn't match ClusterQueue selector"
        return None

    def _namespace_matches(self, namespace: str, selector: dict | None, config: dict) -> bool:
        """A ClusterQueue's namespaceSelector: null matches no namespace, {} every one."""
        if selector is None:
            return False
        if namespace not in config["ns"]:
            config["ns"][namespace] = ((self.objects.get("v1", "Namespace", None, namespace) or {})
                                       .get("metadata") or {}).get("labels") or {}
        return matches_label_selector(selector, config["ns"][namespace])

    def assign(self, job: Tracked, cq: dict, node, config: dict):
        """Flavors per pod set and resource, as FlavorAssigner.assignFlavors does: pod sets in order, each resource
        group given one flavor for all its resources, the usage of earlier pod sets counted against the later.
        Answers (flavors, mode per (flavor, resource), message); flavors is None when nothing fits."""
        assumed: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        flavors, modes, messages, placements = {}, {}, [], {}
        preemption = cq["preemption"]
        for pod_set in job.pod_sets:
            requests = {r: v * pod_set.count for r, v in pod_set.requests.items()}
            selector = (pod_set.template.get("spec") or {}).get("nodeSelector") or {}
            chosen, reasons, failed = {}, [], False
            for resource in sorted(requests):
                if resource in chosen:
                    continue
                group = next((g for g in cq["groups"] if resource in g[0]), None)
                if group is None:
                    if requests[resource] == 0:
                        continue
                    reasons, failed = [f"resource {resource} unavailable in ClusterQueue"], True
                    break
                wanted = {r: requests[r] for r in group[0] if r in requests}
                best, best_modes, group_reasons = self._pick_flavor(group, wanted, selector, node, assumed,
                                                                    preemption, config, pod_set, placements,
                                                                    kueue_tas.tas_only(config["tas"], cq["groups"]))
                if best is None:
                    reasons, failed = group_reasons, True  # the failing group's status replaces the pod set's
                    break
                if any(m != FIT for m in best_modes.values()):
                    reasons.extend(group_reasons)
                chosen.update({r: best for r in wanted})
                modes.update(best_modes)
            if reasons:
                messages.append(f"couldn't assign flavors to pod set {pod_set.name}: {', '.join(sorted(reasons))}")
            if failed:
                return None, modes, "; ".join(messages)
            flavors[pod_set.name] = chosen
            job.topology[pod_set.name] = next((placements[f] for f in chosen.values() if placements.get(f)), {})
            for resource, value in requests.items():
                if resource in chosen:
                    assumed[(chosen[resource], resource)] += value
        return flavors, modes, "; ".join(messages)

    def _pick_flavor(self, group, wanted, selector, node, assumed, preemption, config, pod_set, placements,
                     tas_only):
        """findFlavorForPodSets: the flavors of one resource group in order (each checked first: `kueue_tas.refused`);
        the first where every resource fits ends the search (whenCanBorrow MayStopSearch, borrowing or not); one
        that needs preemption is remembered and the search goes on (whenCanPreempt TryNextFlavor)."""
        best, best_mode, best_modes, reasons = None, NOFIT, {}, []
        covered, flavors = group
        for flavor in flavors:
            labels = config["rf"].get(flavor, {})
            refused = kueue_tas.refused(config["tas"], flavor, labels, selector, pod_set, covered, tas_only)
            if refused:
                reasons.append(refused)
                continue
            mode, frmodes = FIT, {}
            for resource, value in wanted.items():
                fr = (flavor, resource)
                rmode, reason = self._fits(node, fr, assumed[fr], value, preemption)
                if reason:
                    reasons.append(reason)
                frmodes[fr] = rmode
                mode = min(mode, rmode)
                if mode == NOFIT:
                    break
            if mode != NOFIT:  # quota would do: do the flavor's nodes have room, in one domain if asked?
                placements[flavor], why = kueue_tas.place(config["tas"], self.node_usage, flavor, labels, pod_set)
                if placements[flavor] is None:
                    reasons.append(why)
                    continue
            if mode == FIT:
                return flavor, frmodes, []
            if mode > best_mode:
                best, best_mode, best_modes = flavor, mode, frmodes
        return best, best_modes, reasons

    @staticmethod
    def _fits(node, fr, assumed: Decimal, value: Decimal, preemption: dict) -> tuple[int, str]:
        """fitsResourceQuota: no fit past the most this ClusterQueue could ever get, a fit within what is unused,
        else preemption when the policy could free it."""
        total = assumed + value
        most = quota_tree.potential_available(node, fr)
        if total > most:
            return NOFIT, (f"insufficient quota for {fr[1]} in flavor {fr[0]}, previously considered podsets "
                           f"requests ({fmt(assumed)}) + current podset request ({fmt(value)}) > maximum capacity "
                           f"({fmt(most)})")
        free = quota_tree.available(node, fr)
        if total <= free:
            return FIT, ""
        reason = f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, {fmt(total - free)} more needed"
        nominal = node.quotas.get(fr, Quota()).nominal
        borrow_within = (preemption.get("borrowWithinCohort") or {}).get("policy", "Never") != "Never"
        if (nominal >= total or quota_tree.may_reclaim_in_hierarchy(node, fr, total) or borrow_within) and (
                preemption.get("withinClusterQueue", "Never") != "Never"
                or preemption.get("reclaimWithinCohort", "Never") != "Never"):
            return PREEMPT, reason
        return NOFIT, reason

    @staticmethod
    def _requests(job: Tracked, flavors: dict) -> dict:
        total: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        for pod_set in job.pod_sets:
            for resource, value in pod_set.requests.items():
                if resource in flavors.get(pod_set.name, {}):
                    total[(flavors[pod_set.name][resource], resource)] += value * pod_set.count
        return dict(total)

    # Usage -----------------------------------------------------------------------------------------------------

    def charge(self, job: Tracked, sign: int, config: dict | None = None) -> None:
        requests = self._requests(job, job.flavors)
        usage = self.usage[job.cluster_queue]
        node = (config or {}).get("nodes", {}).get(job.cluster_queue)
        for fr, value in requests.items():
            usage[fr] += sign * value
            if node is not None:
                (quota_tree.add_usage if sign > 0 else quota_tree.remove_usage)(node, fr, value)
        kueue_tas.charge(self.node_usage, job, sign)
        job.nodes = kueue_tas.pod_nodes(job) if sign > 0 else []  # where kube-scheduler binds TAS-placed pods
        if sign > 0:
            self.admitted[job.cluster_queue][job.key] = job
        else:
            self.admitted[job.cluster_queue].pop(job.key, None)

    # Admission fair sharing -------------------------------------------------------------------------------------

    def fair_sharing_settings(self) -> dict | None:
        namespace, name, _ = afs.KUEUE_CONFIG
        config_map = self.objects.get("v1", "ConfigMap", namespace, name)
        version = ((config_map or {}).get("metadata") or {}).get("resourceVersion", "")
        if version != self._afs[0]:
            self._afs = (version, afs.configuration(self.objects))
        return self._afs[1]

    def sample_usage(self, now: float) -> None:
        """The LocalQueues' decayed usage, sampled as Kueue's LocalQueue controller does (when the Configuration
        has `admissionFairSharing`)."""
        settings = self.fair_sharing_settings()
        if settings is not None:
            self.ledger.sample(self.objects, afs.admitted_by_queue(self.admitted, lambda j: self._requests(
                j, j.flavors)), settings, now)

    # The Workload's status ---------------------------------------------------------------------------------------

    def pending(self, job: Tracked, reason: str, message: str, now: float) -> None:
        if job.waiting == (reason, message):
            return  # written only when it changed
        job.waiting = (reason, message)
        conditions = self.objects.conditions(KUEUE, "Workload", job.namespace, job.scheduler_object)
        self.objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object, {
            "conditions": set_conditions(conditions, condition("QuotaReserved", False, reason, message, now))})

    def admitted_status(self, job: Tracked, now: float) -> None:
        conditions = self.objects.conditions(KUEUE, "Workload", job.namespace, job.scheduler_object)
        self.objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                                  kueue_status.admitted(job, conditions, now))
        self.objects.patch(job.api_version, job.kind[1], job.namespace, job.name, {"spec": {"suspend": False}})

    def reserved_status(self, job: Tracked, now: float) -> None:
        checks.write_reserved(self.objects, job, now, kueue_status.assignments(job))

    def progress_checks(self, now: float) -> None:
        checks.progress(self, now)

    def running_status(self, job: Tracked, now: float) -> None:
        """Every pod ready: the PodsReady condition turns True (waitForPodsReady, on by default since v0.19)."""
        conditions = self.objects.conditions(KUEUE, "Workload", job.namespace, job.scheduler_object)
        self.objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                                  {"conditions": set_conditions(conditions, kueue_status.pods_ready(now))})

    def finished_status(self, job: Tracked, now: float, succeeded: bool, message: str) -> None:
        conditions = self.objects.conditions(KUEUE, "Workload", job.namespace, job.scheduler_object)
        self.objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object, {
            "conditions": set_conditions(conditions, condition(
                "Finished", True, "Succeeded" if succeeded else "Failed",
                "Job finished successfully" if succeeded else message, now))})

    def evicted_status(self, job: Tracked, now: float, message: str, reason: str) -> None:
        """Evicted and suspended again (jobframework's stopJob)."""
        if reason == checks.EVICTED_BY_CHECK:  # never unsuspended: only the reservation goes
            job.waiting = None
            return checks.write_evicted(self.objects, job, checks.states(self.objects, job), now, reason, message)
        conditions = self.objects.conditions(KUEUE, "Workload", job.namespace, job.scheduler_object)
        self.objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                                  kueue_status.evicted(conditions, message, reason, now, job))
        self.objects.patch(job.api_version, job.kind[1], job.namespace, job.name, {"spec": {"suspend": True}})

    def evict_lost_nodes(self, now: float) -> None:
        """Nodes gone (a spot provider took them back) evict the TAS workloads placed on them (kueue_tas)."""
        alive = {node["metadata"]["name"] for node in self.objects.list("v1", "Node")}
        for jobs in list(self.admitted.values()):
            for job in list(jobs.values()):
                lost = sorted({n for p in job.topology.values() for n in (p or {}).get("nodes", {}) if n not in alive})
                if lost:
                    self.sim.evict(job, now, kueue_tas.lost_nodes_message(lost), reason=kueue_tas.NODE_FAILURES)
                    job.requeue_at = now + kueue_tas.REQUEUE_AFTER_NODE_FAILURE

    def evict_not_ready(self, now: float) -> None:
        kueue_status.evict_not_ready(self.sim, self.admitted, now)

    def adopt(self, job: Tracked, record: dict | None) -> None:
        admission = ((record or {}).get("status") or {}).get("admission") or {}
        job.cluster_queue = admission.get("clusterQueue", "")
        for assignment in admission.get("podSetAssignments") or []:
            job.flavors[assignment.get("name", "")] = dict(assignment.get("flavors") or {})

