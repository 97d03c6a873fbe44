"""Kueue (the API version and release in `portal.upstream`): a team's ClusterQueue and LocalQueue, the cluster's
ResourceFlavors, Topology, WorkloadPriorityClasses and department Cohorts (`kueue_manifests`); a job is an Indexed
Job (or a RayJob) labelled for its LocalQueue, and Kueue's Workload is the record of it.

Flavors made again.
A ResourceFlavor with a topologyName keeps that topologyName, its nodeLabels and its tolerations as made (kueue
v0.19.2 config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml, the CEL rules on oldSelf), so new
topology levels (another Topology name, see `manifests.topology_name`), a flavor no longer placed by topology, or
new labels or tolerations on such a flavor can only be had by deleting the flavor and creating it again. Deleting
is not immediate: the flavor keeps Kueue's resource-in-use finalizer while any ClusterQueue lists it
(pkg/controller/core/resourceflavor_controller.go), and a Topology keeps it while a flavor names it
(pkg/controller/tas/topology_controller.go).

So a flavor to make again is, for a while, out of what the cluster reconcile applies (it is pruned) and out of
every team's ClusterQueue (`team_queue_objects`); once Kueue has let it go, it is applied anew with what it
must now be, and the queues list it again. Workloads admitted on it keep running meanwhile; new ones on it wait.
A flavor found Terminating (deleted by hand, say) is let go and made again the same way.

Pure functions over the desired and live objects.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime

from portal.naming import cluster_scope_selector
from portal.reconcile import is_subset
from portal.upstream import KUEUE_API
from portal.yamltext import dump
from tenants.choices import Scheduler, Sharing
from tenants.manifests import priority_class_name
from tenants.topology import level_label

from . import base, forecast, kueue_fairshare
from . import kueue_manifests as m
from .choices import JobKind, JobState, Placement
from .kueue_forecast import KueuePolicy
from .observe import EVICTED_REASONS, REQUEUED, Observed, admission_time, condition, ray_job, timed_out, true
from .specs import flavor_spec

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_NAME_LABEL = "kueue.x-k8s.io/job-name"
REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
TAS_SHARING = (Sharing.EXCLUSIVE, Sharing.MIG)  # whole devices a node has so many of: what Kueue's TAS places


FIXED_WITH_TOPOLOGY = ("topologyName", "nodeLabels", "tolerations")


def places_by_topology(flavor, mig_strategy: str) -> bool:
    """Whether the flavor's ResourceFlavor names the cluster's Topology, on a cluster that has one
    (`cluster_objects`; the CRD wants a node label beside topologyName)."""
    return flavor.sharing in TAS_SHARING and bool(flavor.scheduled_node_labels(mig_strategy))


def _same(desired, live) -> bool:
    desired, live = desired or None, live or None  # an empty map or list is no field
    if desired is None or live is None:
        return desired is live
    return is_subset(desired, live) and is_subset(live, desired)


def must_remake(desired: dict, live: dict) -> bool:
    """Whether the live ResourceFlavor cannot become the desired one by an update."""
    if live["metadata"].get("deletionTimestamp"):
        return True
    old, new = live.get("spec") or {}, desired.get("spec") or {}
    return "topologyName" in old and not all(_same(new.get(key), old.get(key)) for key in FIXED_WITH_TOPOLOGY)


def flavors_to_remake(desired: list[dict], actual: list[dict]) -> list[str]:
    """Names of the desired ResourceFlavors whose live object must go before they can be what is desired."""
    live = {obj["metadata"]["name"]: obj for obj in actual if obj["kind"] == "ResourceFlavor"}
    return sorted(obj["metadata"]["name"] for obj in desired if obj["kind"] == "ResourceFlavor"
                  and obj["metadata"]["name"] in live and must_remake(obj, live[obj["metadata"]["name"]]))


def without(desired: list[dict], names: list[str]) -> list[dict]:
    """The desired cluster objects less the flavors being made again (so the reconcile prunes them)."""
    return [obj for obj in desired if not (obj["kind"] == "ResourceFlavor" and obj["metadata"]["name"] in names)]


# --- a job's state ------------------------------------------------------------------------------------------


NOT_GPU = {"cpu", "memory", "ephemeral-storage", "pods"}


def kueue_placement(workload: dict | None) -> dict:
    """The flavors a Kueue workload was admitted to and, with Topology-Aware Scheduling, the domains its pods are
    in (status.admission.podSetAssignments[].topologyAssignment: levels, slices of `domainCount` domains whose value
    at each level is `universal` to all, or `individual`: prefix + each root + suffix; apis/kueue/v1beta2/
    workload_types.go). Where the topology's lowest level is the hostname Kueue writes that level alone
    (pkg/cache/scheduler/tas_flavor_snapshot.go, buildAssignment): the wider levels are the nodes' labels
    (`jobs.nodes`)."""
    assignments = (((workload or {}).get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    flavors = sorted({f for a in assignments for r, f in (a.get("flavors") or {}).items() if r not in NOT_GPU})
    domains = []
    for assignment in assignments:
        topology = assignment.get("topologyAssignment") or {}
        for piece in topology.get("slices") or []:
            for index in range(piece.get("domainCount") or 1):
                values = [_level_value(v, index) for v in piece.get("valuesPerLevel") or []]
                domain = dict(zip(topology.get("levels") or [], values, strict=False))
                if domain not in domains:
                    domains.append(domain)
    return {key: value for key, value in (("flavors", flavors), ("domains", domains)) if value}


def _level_value(value: dict, index: int) -> str:
    if "universal" in value:
        return value["universal"]
    individual = value.get("individual") or {}
    roots = individual.get("roots") or []
    root = roots[index] if index < len(roots) else ""
    return f"{individual.get('prefix') or ''}{root}{individual.get('suffix') or ''}"


def kueue_batch_job(job: dict, workload: dict | None) -> Observed:
    """batch/v1 Job admitted by Kueue: the Workload says queued/admitted/preempted; the Job says the rest."""
    status = job.get("status") or {}
    complete, failed = condition(job, "Complete"), condition(job, "Failed")
    if complete.get("status") == "True":
        return Observed(JobState.SUCCEEDED, admitted=True, started_at=status.get("startTime"),
                        finished_at=status.get("completionTime") or complete.get("lastTransitionTime"))
    if failed.get("status") == "True":
        message = f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": ")
        return Observed(JobState.FAILED, message, admitted=True, started_at=status.get("startTime"),
                        finished_at=failed.get("lastTransitionTime"))
    evicted = condition(workload, "Evicted")
    if evicted.get("status") == "True" and evicted.get("reason") in EVICTED_REASONS:
        return Observed(JobState.PREEMPTED, evicted.get("message", ""))
    if message := timed_out(workload):
        return Observed(JobState.QUEUED, message)
    if job.get("spec", {}).get("suspend"):
        waiting = condition(workload, "QuotaReserved")
        if waiting.get("status") == "True":
            return Observed(JobState.QUEUED, checks_waiting(workload))
        # A check that already says why (a budget holding every flavor) says more than the quota does.
        held = checks_waiting(workload, said_only=True)
        return Observed(JobState.QUEUED, held or (waiting.get("message", "") if waiting.get("status") == "False"
                                                  else ""))
    # `ready` counts pods that run; `active` also counts pods still starting. Clusters too old to report
    # `ready` only say `active`.
    if (status.get("ready") or 0) > 0 or ((status.get("active") or 0) > 0 and "ready" not in status):
        return Observed(JobState.RUNNING, admitted=True, started_at=status.get("startTime"))
    if true(workload, "Admitted") or status.get("startTime"):
        return Observed(JobState.ADMITTED, admitted=True, started_at=status.get("startTime"))
    return Observed(JobState.QUEUED)


def _seconds_since(then: str | None, now: str) -> float:
    if not then:
        return 0.0
    return (datetime.fromisoformat(now) - datetime.fromisoformat(then)).total_seconds()


def checks_waiting(workload: dict | None, *, said_only: bool = False) -> str:
    """What the admission checks not Ready yet say of a workload (kueue pkg/workload/admissionchecks.go:
    admitted once it has quota and every check is Ready); `said_only` leaves out checks with no message."""
    checks = ((workload or {}).get("status") or {}).get("admissionChecks") or []
    return " ".join(c.get("message") or f"Admission check {c.get('name')} is {c.get('state')}."
                    for c in checks if c.get("state") != "Ready" and (c.get("message") or not said_only))


# --- preemption in words ------------------------------------------------------------------------------------

# Kueue's preemption message and its reasons in words (pkg/scheduler/preemption/preemption.go:
# "Preempted to accommodate a workload (UID: …, JobUID: …) due to <reason>; preemptor path: …").
_PREEMPTED = re.compile(
    r"Preempted to accommodate a (?:higher priority )?workload.*?(?:due to (?P<reason>[^;]+))?(?:;|$)", re.I | re.S)
_REASONS = {
    "prioritization in the ClusterQueue": "a higher-priority job of the same team needed the GPUs",
    "reclamation within the cohort": "another team took back the guaranteed quota this job was borrowing",
    "reclamation within the cohort while borrowing": "another team took back the guaranteed quota this job was "
                                                     "borrowing",
    "Fair Sharing within the cohort": "fair sharing gave the GPUs to a team that had used less",
}
# Kueue evicts a workload whose assigned nodes are gone and cannot be replaced (pkg/scheduler/scheduler.go,
# evictWorkloadAfterFailedTASReplacement): on spot capacity, its provider taking the nodes back.
_NODES_LOST = re.compile(r"no replacement for unhealthy node\(s\): (?P<nodes>\S+)", re.I)


def preempted_sentence(message: str) -> str:
    lost = _NODES_LOST.search(message)
    if lost:
        return (f"Evicted: the nodes it ran on ({lost['nodes']}) went away, as spot capacity does when its provider "
                "takes it back. It queues again and starts over on whatever capacity is free (reserved first).")
    kueue = _PREEMPTED.search(message)
    why = _REASONS.get((kueue["reason"] or "").strip()) if kueue else None
    return f"Preempted: {why}. {REQUEUED}" if why else ""


def kueue_mapping(flavor) -> dict:
    """The entry Kueue's Configuration needs under `resources.deviceClassMappings` (KueueDRAIntegration, beta and
    on by default since v0.18: kueue pkg/features/kube_features.go) for its quota to count this class."""
    if flavor.sharing != Sharing.DRA:
        return {}
    return {"name": flavor.resource_name, "deviceClassNames": [flavor.device_class]}


# --- the backend --------------------------------------------------------------------------------------------


class Kueue:
    name = Scheduler.KUEUE
    team_kinds = [(KUEUE_API, "ClusterQueue"), (KUEUE_API, "LocalQueue")]
    cluster_kinds = [(KUEUE_API, kind) for kind in ("ResourceFlavor", "WorkloadPriorityClass", "Cohort", "Topology",
                                                     "AdmissionCheck")]
    job_kinds = [("v1", "Service"), ("batch/v1", "Job")]
    record_kind = (KUEUE_API, "Workload")
    refusal_events = ""  # the Workload's QuotaReserved condition says why it waits
    cohort_tree = True
    queues_under_cluster_queues = False
    prefers_reserved = False  # the ClusterQueue lists spot after reserved: Kueue falls back by itself
    discovers_hypernodes = False
    decays_usage = True  # admission fair sharing, where its Configuration turns it on (`kueue_fairshare`)
    placement_from_pods = False  # the Workload's topologyAssignment says where it is (`kueue_placement`)
    cpu_memory_per_flavor = True  # each flavor of the team's ClusterQueue carries its own (`cluster_queue_manifest`)

    # --- queues -------------------------------------------------------------------------------------------
    def team_parent(self, cluster, department: str | None) -> str:
        """The Cohort a team's ClusterQueue joins: its department's, else the cluster's."""
        return department or cluster.cohort

    def team_queue_objects(self, spec, cluster) -> list[dict]:
        """A flavor being made again is left out of the ClusterQueue until it is back."""
        remaking = set(cluster.replacing_flavors)
        queue = replace(spec, quotas=tuple(q for q in spec.quotas if q.flavor.name not in remaking)) \
            if remaking else spec
        return [m.cluster_queue_manifest(queue), m.local_queue_manifest(spec)]

    def cluster_objects(self, cluster, *, flavors, departments, tiers, team_specs) -> list[dict]:
        labels = [level["node_label"] for level in cluster.topology_levels]
        topology = m.topology_name(labels) if labels else ""
        objects = [
            m.resource_flavor_manifest(flavor_spec(f, cluster.mig_strategy,
                                                   topology if f.sharing in TAS_SHARING else "")) for f in flavors]
        if topology:
            objects.append(m.topology_manifest(labels))
        objects += [
            m.workload_priority_class_manifest(name=priority_class_name(t.name), value=t.value,
                                               description=t.description or f"GPU portal priority tier {t.name}")
            for t in tiers
        ]
        objects += [m.cohort_manifest(name=d.slug, parent=cluster.cohort, weight=d.fair_share_weight)
                    for d in departments]
        return objects + [m.budget_check_manifest()]

    def prepare_cluster(self, desired: list[dict], actual: list[dict], *, widen: bool) -> base.Prepared:
        remaking = flavors_to_remake(desired, actual)
        return base.Prepared(desired=without(desired, remaking), remaking=remaking)

    def apply_levels(self, objects: list[dict], *, children_first: bool) -> list[list[dict]]:
        return [objects]

    def scheduler_setup(self) -> list[dict]:
        return []

    def flavor_setup(self, flavor) -> list[tuple[str, str]]:
        if flavor.sharing != Sharing.DRA:
            return []
        return [("Kueue Configuration (KueueDRAIntegration is beta and on by default in v0.19)",
                 dump({"resources": {"deviceClassMappings": [kueue_mapping(flavor)]}}))]

    def queue_limit_problem(self, flavors) -> str:
        """A team may hold every flavor of its cluster, all in its ClusterQueue's one resource group
        (`kueue_manifests.cluster_queue_manifest`): the cluster must stay within that group's limits."""
        names = {f.resource_name for f in flavors}
        if len(flavors) > m.MAX_GROUP_FLAVORS:
            return (f"A Kueue cluster can offer at most {m.MAX_GROUP_FLAVORS} GPU flavors (a team's ClusterQueue lists "
                    f"them all in one resource group); this would make {len(flavors)}.")
        if len(names) + 2 > m.MAX_COVERED_RESOURCES:
            return (f"A Kueue cluster can offer at most {m.MAX_COVERED_RESOURCES - 2} GPU resource names (a team's "
                    f"ClusterQueue covers them with cpu and memory in one resource group); this would make "
                    f"{len(names)}.")
        return ""

    def flavor_in_use(self, flavor_name: str, resource: str, quota_status: dict) -> int | None:
        """Kueue counts per flavor (the ClusterQueue's `flavorsUsage`)."""
        if "flavors" not in quota_status:
            return None
        return (quota_status["flavors"].get(flavor_name) or {}).get(resource, 0)

    def decayed_usage(self, objects: list[dict]) -> dict | None:
        """The team's LocalQueue's `status.fairSharing.admissionFairSharingStatus` (`kueue_fairshare`)."""
        for obj in objects:
            if obj.get("kind") == "LocalQueue":
                found = kueue_fairshare.consumed_from_status(obj)
                if found is not None:
                    consumed, updated = found
                    return {"consumed": {name: round(value, 6) for name, value in sorted(consumed.items())},
                            "updated": updated}
        return None

    # --- jobs ---------------------------------------------------------------------------------------------
    def scheduling_labels(self, spec) -> dict[str, str]:
        labels = {QUEUE_LABEL: spec.local_queue}
        if spec.priority_class:
            labels[PRIORITY_LABEL] = spec.priority_class
        return labels

    def job_objects(self, spec, parts) -> list[dict]:
        if spec.kind == JobKind.PYTORCH:
            return [m.headless_service_manifest(spec, parts),
                    m.indexed_job_manifest(spec, parts, env=m.rendezvous_env(spec), subdomain=spec.name)]
        return [m.indexed_job_manifest(spec, parts)]

    def ray_labels(self, spec) -> dict[str, str]:
        return {}

    def topology_problem(self, *, cluster, flavor, kind: str, level: str) -> str:
        if flavor.sharing not in TAS_SHARING:
            return (f"Flavor {flavor.name} is shared ({flavor.get_sharing_display()}): Kueue places only whole "
                    f"devices by topology.")
        if not flavor.node_labels:
            return (f"Flavor {flavor.name} has no node labels, so Kueue cannot tell which nodes it is on and cannot "
                    f"place it by topology.")
        return ""

    def placement_fields(self, *, cluster, flavor, level: str, mode: str) -> dict:
        """The pod sets carry the level's node label as a required or preferred topology (kueue
        apis/kueue/v1beta1/topology_types.go). A job on a flavor with the cluster's topology that asks for no level
        still asks for topology-aware scheduling, unconstrained: Kueue gives a pod set with no topology request
        no flavor that has a topology unless every flavor of its queue has one
        (pkg/scheduler/flavorassigner/tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS), and a team's queue
        may also hold a shared flavor, which has none."""
        if not level:
            tas = bool(cluster.topology_levels) and places_by_topology(flavor, cluster.mig_strategy)
            return {"pod_annotations": {UNCONSTRAINED_ANNOTATION: "true"} if tas else {}, "network_topology": {}}
        key = REQUIRED_ANNOTATION if mode == Placement.REQUIRED else PREFERRED_ANNOTATION
        return {"pod_annotations": {key: level_label(cluster.topology_levels, level)}, "network_topology": {}}

    def observe(self, kind: str, job: dict, record: dict | None, refusals: dict[str, str]) -> Observed:
        observed = ray_job(job, record) if kind == JobKind.RAY else kueue_batch_job(job, record)
        return replace(observed, admitted_at=admission_time(job, record, None), placement=kueue_placement(record))

    def preempted_sentence(self, message: str) -> str:
        return preempted_sentence(message)

    # --- budgets: the portal is the controller of an AdmissionCheck its teams' ClusterQueues list ------------
    budget_check = m.BUDGET_CHECK
    budget_holds_in_portal = False  # Kueue holds every workload at admission, however it was submitted
    budget_status_kinds = [(KUEUE_API, "AdmissionCheck"), (KUEUE_API, "Workload")]

    def budget_undecided(self, record: dict) -> bool:
        """A Workload holding quota whose budget check nobody has decided yet (the cluster watcher asks for a pass
        at once, so a team within its budget is not kept waiting for the next one)."""
        status = record.get("status") or {}
        entry = next((c for c in status.get("admissionChecks") or [] if c.get("name") == m.BUDGET_CHECK), None)
        return (entry is not None and entry.get("state") == "Pending" and not entry.get("message")
                and bool(status.get("admission")) and not true(record, "Admitted"))

    def budget_controller_reads(self) -> list[tuple]:
        return [(KUEUE_API, "AdmissionCheck", None, cluster_scope_selector())]

    def budget_controller_writes(self, objects: list[dict], now: str) -> list[dict]:
        """The check marked Active where it is not yet (the cluster reconcile creates it)."""
        check = next((o for o in objects if o["metadata"]["name"] == m.BUDGET_CHECK), None)
        return [m.budget_check_active_status(now)] if check is not None and not true(check, "Active") else []

    def budget_reads(self, *, namespace: str, team_slug: str) -> list[tuple]:
        return [(KUEUE_API, "Workload", namespace, "")]

    def budget_writes(self, objects: list[dict], *, queue_name: str, hold_message, now: str,
                      release_after: int = 0) -> list[dict]:
        """The check's state on each Workload that lists it and is not admitted or finished: Pending with the
        budget's sentence while it holds the workload's flavors, Ready when within. A workload without a quota
        reservation has no flavors yet: only a hold on every flavor (the money budget) is said on it then; it is
        decided once Kueue reserves quota for it (as Kueue's own check controllers wait for the reservation).
        A held workload keeps its reservation (Kueue admits it the moment the check is Ready) for `release_after`
        seconds at most, then is set to Retry: Kueue evicts it, its quota serves others meanwhile, and it queues
        again after that many seconds (requeueAfterSeconds). `hold_message(flavor_names or None)` is the
        sentence, "" when nothing holds them."""
        writes = []
        for workload in objects:
            status = workload.get("status") or {}
            entry = next((c for c in status.get("admissionChecks") or [] if c.get("name") == m.BUDGET_CHECK), None)
            if entry is None or true(workload, "Admitted") or true(workload, "Finished"):
                continue
            flavors = kueue_placement(workload).get("flavors") if status.get("admission") else None
            message = hold_message(flavors)
            if flavors is None and not message and entry.get("retryCount"):
                message = hold_message(base.ANY_FLAVOR)  # sent back for the budget before, and still held
            if flavors is None and not message and not entry.get("message"):
                continue
            # Without a reservation a lifted hold only takes its words back; the decision waits for the flavors.
            state = "Pending" if message or flavors is None else "Ready"
            reserved_for = _seconds_since(condition(workload, "QuotaReserved").get("lastTransitionTime"), now)
            if state == "Pending" and flavors is not None and release_after and reserved_for >= release_after:
                writes.append(m.workload_check_status(workload, state="Retry", message=message, now=now,
                                                      requeue_after=release_after))
            elif (entry.get("state"), entry.get("message", "")) != (state, message):
                writes.append(m.workload_check_status(workload, state=state, message=message, now=now))
        return writes

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
        return KueuePolicy()


BACKEND = base.register(Kueue())
base.JOB_NAME_LABELS.append(JOB_NAME_LABEL)
