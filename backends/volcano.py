"""Volcano (the release in `portal.upstream`): a team's Queue under its department's Queue or the cluster's parent
Queue (`volcano_manifests`); a job is a vcjob (or a RayJob) in its team's Queue, and Volcano's PodGroup is the
record of it, with the Events its enqueue action writes saying why it waits.

Volcano checks a Queue against its parent and its children as they are now (pkg/webhooks/admission/queues/
validate): a parent must grow before the queues under it and shrink after them. So a cluster's plan is prepared by
widening each parent to at least its present size, and applied one level of the hierarchy at a time, parents
first, or children first when the exact sizes follow.
"""

from __future__ import annotations

import re
from dataclasses import replace

import yaml

from portal.naming import team_selector
from portal.upstream import VOLCANO_SCHEDULING_API
from portal.yamltext import dump
from tenants.choices import Scheduler, Sharing
from tenants.topology import HOSTNAME_LABEL

from . import base, forecast
from . import volcano_manifests as m
from .choices import JobKind, JobState, Placement
from .observe import REQUEUED, Observed, admission_time, condition, ray_job
from .volcano_forecast import VolcanoPolicy

QUEUE_LABEL = "volcano.sh/queue-name"
JOB_NAME_LABEL = "volcano.sh/job-name"
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
ROOT_QUEUE = "root"
# Volcano's words on a PodGroup that are in no condition, only in Normal Events on it: why its enqueue action
# refused it (reason Unschedulable, from plugins/proportion, capacity, overcommit: "queue resource quota
# insufficient: ..."), and which action evicted its pods (reason Evict, message "reclaim" or "preempt":
# pkg/scheduler/cache/cache.go SchedulerCache.Evict). The scheduler's cache also writes, every session, a Warning
# Event reason Unschedulable for any PodGroup still Pending or Inqueue ("0/0 tasks in gang unschedulable: ...",
# RecordJobStatusEvent): not a refusal. One list reads both; the latest of each reason is kept (`base.event_key`).
REFUSAL_EVENTS = "involvedObject.kind=PodGroup,type=Normal"
REFUSED, EVICTED_BY = "Unschedulable", "Evict"

# What the page says of a job Volcano's job controller restarted after an eviction (`volcano_job`), by the action
# the PodGroup's latest Evict Event names; Volcano never names the job the room was made for.
EVICTED = "Its pods were evicted and Volcano restarted it"
RESTARTED_AFTER = {
    "reclaim": "Volcano reclaimed its GPUs for a queue below its guaranteed share and restarted it",
    "preempt": "Volcano preempted it for higher-priority work and restarted it",
}
VOLCANO_PHASES = {
    "Pending": JobState.QUEUED,
    "Inqueue": JobState.ADMITTED,
    "Running": JobState.RUNNING,
    "Restarting": JobState.RUNNING,
    "Completing": JobState.RUNNING,
    "Completed": JobState.SUCCEEDED,
    "Failed": JobState.FAILED,
    "Aborted": JobState.FAILED,
    "Aborting": JobState.FAILED,
    "Terminated": JobState.FAILED,
    "Terminating": JobState.FAILED,
}


def volcano_job(job: dict, podgroup: dict | None, refusal: str = "", evicted_by: str = "") -> Observed:
    """`refusal`: the message of the latest Unschedulable Event on the PodGroup, Volcano's only word on why its
    enqueue action keeps a PodGroup Pending; `evicted_by`: that of its latest Evict Event, the action that evicted
    its pods ("reclaim" or "preempt"). An Inqueue PodGroup whose gang cannot be placed is still waiting,
    with the gang plugin's NotEnoughResources condition. The scheduler replaces a condition by its type and never
    removes one (v1.15.1 framework/session.go UpdatePodGroupCondition), so once the gang is placed its old
    Unschedulable stays, still True, beside a newer Scheduled: that one is no longer the news."""
    phase_info = (job.get("status") or {}).get("state") or {}
    phase = phase_info.get("phase", "Pending")
    state = VOLCANO_PHASES.get(phase, JobState.QUEUED)
    message = phase_info.get("message", "")
    waiting, why = podgroup_waiting(podgroup, refusal)
    if state == JobState.QUEUED and not waiting and ((podgroup or {}).get("status") or {}).get("phase") == "Inqueue":
        state = JobState.ADMITTED
    if state == JobState.QUEUED:
        message = why or message
    if phase == "Aborted" and "preempt" in (phase_info.get("reason", "") + message).lower():
        state = JobState.PREEMPTED
    restarts = (job.get("status") or {}).get("retryCount") or 0
    if restarts and (phase == "Restarting" or (phase == "Pending" and waiting)):
        # Volcano's job controller restarts a job whose pod was evicted (the portal's PodEvicted policy), counting
        # it in retryCount and writing no reason (pkg/controllers/job/state/running.go); the scheduler's reclaim
        # or preempt action says which only in Events (pkg/scheduler/cache/cache.go Evict).
        said = RESTARTED_AFTER.get(evicted_by.strip().lower(), EVICTED)
        return Observed(JobState.PREEMPTED, f"{said} (restart {restarts}). {why}".strip())
    transition = phase_info.get("lastTransitionTime")
    return Observed(
        state,
        message,
        admitted=state not in (JobState.QUEUED,),
        started_at=transition if state == JobState.RUNNING else None,
        finished_at=transition if state in (JobState.SUCCEEDED, JobState.FAILED) else None,
    )


def podgroup_waiting(podgroup: dict | None, refusal: str = "") -> tuple[bool, str]:
    """Whether Volcano still keeps the PodGroup's gang from running, and its words: a PodGroup not let into its
    queue (phase Pending, or none yet) waits with the enqueue refusal; an Inqueue one whose gang cannot be placed
    waits with the gang plugin's Unschedulable condition, unless a newer Scheduled says it was placed since (the
    words of an old one stay on a job Volcano keeps for another reason, as they always did)."""
    pg_phase = ((podgroup or {}).get("status") or {}).get("phase")
    unschedulable, scheduled = condition(podgroup, "Unschedulable"), condition(podgroup, "Scheduled")
    gang = unschedulable.get("status") == "True" and not (
        scheduled.get("status") == "True"
        and (scheduled.get("lastTransitionTime") or "") >= (unschedulable.get("lastTransitionTime") or ""))
    gang_words = unschedulable.get("message", "") if gang else ""
    if pg_phase in (None, "Pending"):
        # Pods made before the PodGroup was let in (KubeRay makes them at once) also get the gang's "pod group is
        # not ready" condition; the enqueue refusal is the cause, so it comes first.
        return True, refusal or gang_words
    return gang and pg_phase == "Inqueue", gang_words


def volcano_ray_job(job: dict, podgroup: dict | None, refusal: str = "") -> Observed:
    """A RayJob under KubeRay's Volcano plugin (`--batch-scheduler=volcano`). KubeRay marks it Initializing and
    creates its RayCluster and pods at once, before Volcano has let the PodGroup (`ray-<job>-pg`) into the queue
    (ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go), so until the gang is placed the
    PodGroup, not the RayJob, says whether it waits and why."""
    observed = ray_job(job)
    if podgroup is None or observed.state not in (JobState.QUEUED, JobState.ADMITTED):
        return observed
    waiting, why = podgroup_waiting(podgroup, refusal)
    return Observed(JobState.QUEUED, why) if waiting else observed


def volcano_tier(levels, name: str) -> int:
    """Tier of a level among Volcano's HyperNodes: the narrowest grouping of nodes is tier 1 (nodes themselves are
    the members, so the hostname level has no tier)."""
    groups = [level["name"] for level in levels if level["node_label"] != HOSTNAME_LABEL]
    return len(groups) - groups.index(name) if name in groups else 0


def queue_levels(objects: list[dict], *, children_first: bool) -> list[list[dict]]:
    """The objects by their depth in the Queue hierarchy they form, parents first (or children first)."""
    parents = {obj["metadata"]["name"]: (obj.get("spec") or {}).get("parent") for obj in objects
               if obj["kind"] == "Queue"}

    def depth(obj: dict) -> int:
        name, seen = obj["metadata"]["name"], 0
        while obj["kind"] == "Queue" and parents.get(name) in parents and seen < len(parents):
            name, seen = parents[name], seen + 1
        return seen

    depths = [depth(obj) for obj in objects]
    return [[obj for obj, d in zip(objects, depths, strict=True) if d == level]
            for level in sorted(set(depths), reverse=children_first)]


# Volcano evicts with the reason "preempt" (same queue, priority) or "reclaim" (another queue takes its share back)
# (pkg/scheduler/actions/preempt/preempt.go and reclaim/reclaim.go); the sync words it
# "Evicted by <reason> to schedule <namespace>/<name>".
_PREEMPTED = re.compile(r"Evicted by (?P<how>preempt|reclaim)\w* to schedule (?P<who>\S+)", re.I)


def preempted_sentence(message: str) -> str:
    if message.startswith(RESTARTED_AFTER["reclaim"]):
        return "Preempted: Volcano reclaimed its GPUs for a queue below its guaranteed share; this job's team held " \
               f"more than its own share. {REQUEUED}"
    if message.startswith(RESTARTED_AFTER["preempt"]):
        return f"Preempted: Volcano evicted its pods to make room for higher-priority work in its queue. {REQUEUED}"
    if message.startswith(EVICTED):
        return "Preempted: Volcano evicted its pods to make room for another job (one of a higher priority, or " \
               f"another team's taking back the quota this job was borrowing). {REQUEUED}"
    volcano = _PREEMPTED.search(message)
    if volcano and volcano["how"].lower() == "reclaim":
        return f"Preempted: another team took back the quota this job was borrowing, for {volcano['who']}. " \
               f"{REQUEUED}"
    if volcano:
        return f"Preempted: the scheduler stopped this job to make room for {volcano['who']}, which has a higher " \
               f"priority. {REQUEUED}"
    return ""


class Volcano:
    name = Scheduler.VOLCANO
    team_kinds = [(VOLCANO_SCHEDULING_API, "Queue")]
    cluster_kinds = [(VOLCANO_SCHEDULING_API, "Queue")]
    job_kinds = [(m.VOLCANO_BATCH_API, "Job")]
    record_kind = (VOLCANO_SCHEDULING_API, "PodGroup")
    refusal_events = REFUSAL_EVENTS
    cohort_tree = False
    queues_under_cluster_queues = True
    prefers_reserved = True  # no flavors, no fallback of its own: a spot-allowed job prefers the reserved nodes
    discovers_hypernodes = True  # from node labels, by its controller's label discovery (`tenants.topology`)
    decays_usage = False  # v1.15 shares out what is allocated now (`decayed_usage`)
    cpu_memory_per_flavor = False  # the queue's capability pools the team's CPU and memory
    placement_from_pods = True  # the lowest HyperNode holding the gang's nodes (`jobs.hypernodes`)

    # --- queues -------------------------------------------------------------------------------------------
    def team_parent(self, cluster, department: str | None) -> str:
        """The parent Queue of a team's Queue: its department's, else the cluster's (none under `root`)."""
        if department:
            return m.department_queue_name(department)
        return "" if cluster.cohort == ROOT_QUEUE else cluster.cohort

    def team_queue_objects(self, spec, cluster) -> list[dict]:
        return [m.volcano_queue_manifest(spec, parent=spec.cohort)]

    def cluster_objects(self, cluster, *, flavors, departments, tiers, team_specs) -> list[dict]:
        objects = []
        specs = team_specs()
        parent = "" if cluster.cohort in ("", ROOT_QUEUE) else cluster.cohort
        if parent:
            # Volcano has no implicit parents (as Kueue has cohorts): the cluster's parent queue is the portal's to
            # create and size, above every team queue and department queue of the cluster.
            objects.append(m.volcano_parent_queue_manifest(name=parent, teams=[spec for _, spec in specs]))
        for department in departments:
            children = [spec for parent_id, spec in specs if parent_id == department.pk]
            objects.append(m.volcano_department_queue_manifest(name=department.slug, children=children,
                                                               parent=parent, weight=department.fair_share_weight))
        return objects

    # --- budgets: a held team's Queue is closed ------------------------------------------------------------
    budget_check = ""
    budget_holds_in_portal = True  # the webhook refuses jobs to a closed queue, so the portal keeps them meanwhile
    budget_status_kinds = [(VOLCANO_SCHEDULING_API, "Queue")]

    def budget_undecided(self, record: dict) -> bool:
        return False  # the queue is open or closed for the whole team: nothing waits on a decision per job

    def budget_controller_reads(self) -> list[tuple]:
        return []

    def budget_controller_writes(self, objects: list[dict], now: str) -> list[dict]:
        return []

    def budget_reads(self, *, namespace: str, team_slug: str) -> list[tuple]:
        return [(VOLCANO_SCHEDULING_API, "Queue", None, team_selector(team_slug))]

    def budget_writes(self, objects: list[dict], *, queue_name: str, hold_message, now: str,
                      release_after: int = 0) -> list[dict]:
        """The team's Queue Closed while anything holds the team (Volcano knows resources, not flavors, so an
        allowance on one flavor closes the queue), Open after. The queue controller keeps a state it finds in
        status (volcano pkg/controllers/queue/state: open.go, closed.go; a closed queue with running pod
        groups reads Closing); the job webhook refuses a job to a queue that is not Open
        (pkg/webhooks/admission/jobs/validate/admit_job.go) and the scheduler enqueues nothing from it
        (pkg/scheduler/plugins/proportion)."""
        queue = next((q for q in objects if q["metadata"]["name"] == queue_name), None)
        if queue is None:
            return []
        wanted = "Closed" if hold_message(base.ANY_FLAVOR) else "Open"
        state = (queue.get("status") or {}).get("state") or "Open"
        if (state in ("Closed", "Closing")) == (wanted == "Closed"):
            return []
        return [m.volcano_queue_state(queue_name, wanted)]

    def prepare_cluster(self, desired: list[dict], actual: list[dict], *, widen: bool) -> base.Prepared:
        if not widen:
            return base.Prepared(desired=desired)
        live = {(obj["kind"], obj["metadata"]["name"]): obj for obj in actual}
        return base.Prepared(desired=[m.volcano_queue_widened(obj, live.get((obj["kind"], obj["metadata"]["name"])))
                                      for obj in desired])

    def apply_levels(self, objects: list[dict], *, children_first: bool) -> list[list[dict]]:
        return queue_levels(objects, children_first=children_first)

    def scheduler_setup(self) -> list[dict]:
        """Volcano's scheduler ConfigMap (volcano-system/volcano-scheduler-configmap) as upstream's guide to
        hierarchical queues gives it (docs/user-guide/how_to_use_capacity_plugin.md): the capacity plugin, which the
        portal's department queues need, and the reclaim action."""
        conf = {"actions": "enqueue, allocate, backfill, reclaim", "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False},
                         {"name": "conformance"}]},
            {"plugins": [{"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
                         {"name": "capacity", "enableHierarchy": True}, {"name": "nodeorder"},
                         {"name": "binpack"}]}]}
        return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}},
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                 "data": {"volcano-scheduler.conf": yaml.safe_dump(conf, sort_keys=False)}}]

    def queue_limit_problem(self, flavors) -> str:
        return ""

    def flavor_setup(self, flavor) -> list[tuple[str, str]]:
        if flavor.sharing != Sharing.DRA:
            return []
        return [("Volcano scheduler configuration (capacity plugin; the proportion plugin ignores DRA)",
                 dump({"tiers": [{"plugins": [{"name": "capacity", "arguments": {
                     "capacity.DynamicResourceAllocationEnable": True}}]}]})
                 + f"The team queues count deviceclass/{flavor.device_class}.")]

    def flavor_in_use(self, flavor_name: str, resource: str, quota_status: dict) -> int | None:
        """No flavors: per resource, the Queue's `allocated`, which counts only pods Volcano has placed
        (framework/session.go updateQueueStatus: tasks in an allocated status). The ResourceQuota's `used` also
        counts a job's pods still pending (Volcano creates them once the job is let into its queue, and again
        when it restarts an evicted job), so it is the fallback, for a queue not yet counted and for DRA
        devices, which the Queue names by device class."""
        allocated = quota_status.get("allocated") or {}
        return allocated[resource] if resource in allocated else None

    def decayed_usage(self, objects: list[dict]) -> dict | None:
        """Volcano v1.15 keeps no usage over time: its proportion and capacity plugins share out what is allocated
        now (a decaying per-user fair share is only on its main branch, volcano-sh/volcano#5161)."""
        return None

    # --- jobs ---------------------------------------------------------------------------------------------
    def scheduling_labels(self, spec) -> dict[str, str]:
        return {QUEUE_LABEL: spec.volcano_queue}

    def job_objects(self, spec, parts) -> list[dict]:
        if spec.kind == JobKind.PYTORCH:
            return [m.pytorch_job_manifest(spec, parts)]
        return [m.volcano_job_manifest(spec, parts, [m.volcano_task(spec, parts, "main", spec.workers)])]

    def ray_labels(self, spec) -> dict[str, str]:
        return {RAY_PRIORITY_LABEL: spec.priority_class} if spec.priority_class else {}

    def topology_problem(self, *, cluster, flavor, kind: str, level: str) -> str:
        if kind == JobKind.RAY:
            return "On Volcano, network topology applies to Volcano jobs; a Ray job cannot keep to one domain."
        if not volcano_tier(cluster.topology_levels, level):
            return "On Volcano a single host is not a network tier: choose a wider level."
        return ""

    def placement_fields(self, *, cluster, flavor, level: str, mode: str) -> dict:
        """The vcjob's networkTopology: hard or soft, and the widest tier it may span (staging/src/volcano.sh/apis/
        pkg/apis/batch/v1alpha1/job.go, NetworkTopologySpec)."""
        topology = {"mode": "hard" if mode == Placement.REQUIRED else "soft",
                    "highestTierAllowed": volcano_tier(cluster.topology_levels, level)} if level else {}
        return {"pod_annotations": {}, "network_topology": topology}

    def observe(self, kind: str, job: dict, record: dict | None, refusals: dict[str, str]) -> Observed:
        name = ((record or {}).get("metadata") or {}).get("name", "")
        refusal = refusals.get(base.event_key(name, REFUSED), "")
        if kind == JobKind.RAY:
            observed = volcano_ray_job(job, record, refusal)
        else:
            observed = volcano_job(job, record, refusal, refusals.get(base.event_key(name, EVICTED_BY), ""))
        return replace(observed, admitted_at=admission_time(job, None, record))

    def preempted_sentence(self, message: str) -> str:
        return preempted_sentence(message)

    # --- estimates ----------------------------------------------------------------------------------------
    def estimate_world(self, holdings: list, *, cohort: str, capacity: dict[str, int],
                       resources: dict[str, str]) -> forecast.World:
        """The cluster's queues, as this scheduler is given them, from what each team holds (`forecast.Holding`)."""
        return self.forecast_policy().world(holdings, cohort=cohort, capacity=capacity, resources=resources)

    def estimate(self, world: forecast.World, works: list, now: float, later: tuple = ((), (), ())) -> dict:
        """When each waiting job will start and each running one end (`forecast.Estimate` by job key), allowing for
        the jobs expected to be submitted later (`arrivals.Outlook.replays`)."""
        return forecast.forecast(world, works, self.forecast_policy(), now, later)

    def forecast_policy(self):
        return VolcanoPolicy(capacity_plugin=True)


BACKEND = base.register(Volcano())
base.JOB_NAME_LABELS.append(JOB_NAME_LABEL)
