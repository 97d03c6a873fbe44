"""Pure builders of Kueue's objects for a cluster and its teams: ResourceFlavor, Topology, WorkloadPriorityClass,
Cohort, ClusterQueue and LocalQueue (the API version in `portal.upstream`); and what a job is under Kueue: an
Indexed batch/v1 Job, with the headless Service a PyTorch job's pods rendezvous through (Kueue's Kubeflow v1
PyTorchJob integration is off by default since v0.19). Values in, plain dicts out, deterministic names."""

import hashlib

from portal.naming import cluster_labels, team_labels
from portal.upstream import KUEUE_API as KUEUE

from .specs import FlavorSpec, TeamQuotaSpec, gib

LOCAL_QUEUE = "default"  # Kueue's webhook also sends unlabelled jobs to a LocalQueue named "default"
NS_NAME_LABEL = "kubernetes.io/metadata.name"
TOPOLOGY_PREFIX = "gpu-portal-"  # the cluster's one Kueue Topology, named by every TAS ResourceFlavor
RENDEZVOUS_PORT = 29500
# The ClusterQueue's limits on one resource group (apis/kueue/v1beta2/clusterqueue_types.go, MaxItems): the team's
# one group lists cpu and memory beside its GPU resource names, and a flavor per GPU flavor it holds.
MAX_COVERED_RESOURCES = 64
MAX_GROUP_FLAVORS = 64


def resource_flavor_manifest(flavor: FlavorSpec) -> dict:
    spec = {}
    if flavor.node_labels:
        spec["nodeLabels"] = dict(sorted(flavor.node_labels.items()))
    if flavor.node_taints:
        spec["nodeTaints"] = list(flavor.node_taints)
    if flavor.tolerations:
        spec["tolerations"] = list(flavor.tolerations)
    if flavor.topology and flavor.node_labels:  # the CRD requires a node label beside topologyName
        spec["topologyName"] = flavor.topology
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor.name, "labels": cluster_labels()},
        "spec": spec,
    }


def workload_priority_class_manifest(*, name: str, value: int, description: str) -> dict:
    return {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name, "labels": cluster_labels()},
        "value": value,
        "description": description,
    }


def topology_name(node_labels: list[str]) -> str:
    """Named after its levels: Kueue keeps a Topology's levels as made (the CRD's CEL rule), so other levels are
    another Topology, and the one no flavor names any more is pruned (see `backends.kueue.flavors_to_remake`)."""
    return TOPOLOGY_PREFIX + hashlib.sha256("\n".join(node_labels).encode()).hexdigest()[:10]


def topology_manifest(node_labels: list[str]) -> dict:
    """The cluster's topology levels, broadest first (kueue apis/kueue/v1beta2/topology_types.go)."""
    return {"apiVersion": KUEUE, "kind": "Topology",
            "metadata": {"name": topology_name(node_labels), "labels": cluster_labels()},
            "spec": {"levels": [{"nodeLabel": label} for label in node_labels]}}


def cohort_manifest(*, name: str, parent: str = "", weight: int = 1) -> dict:
    spec = {"parentName": parent} if parent else {}
    if weight != 1:
        spec["fairSharing"] = {"weight": str(weight)}
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name, "labels": cluster_labels()},
            "spec": spec}


def _quantity(resource: str, value: int) -> str:
    return gib(value) if resource == "memory" else str(value)


def cluster_queue_manifest(team: TeamQuotaSpec) -> dict:
    """One resource group covering cpu, memory and every GPU resource name the team holds, with a flavor per GPU
    flavor, as Kueue's docs set up node types: each flavor carries its quota's own CPU and memory and its GPUs
    (nominalQuota = guaranteed, borrowingLimit = burst, only inside a cohort, as Kueue requires), and "0" for the
    GPU resource names it does not provide (every flavor of a group lists every covered resource, in order).

    So a pod set's CPU, memory and GPUs all come from one flavor: Kueue's topology-aware scheduling places a pod set
    only when every resource it requests is assigned from a flavor with the topology
    (pkg/scheduler/flavorassigner/tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS), and a queue whose
    flavors all name one places pod sets without a topology request too (implied TAS). CPU-only pods fit a GPU
    flavor with 0 GPUs, so no label-less CPU flavor is listed (it would end implied TAS for the whole queue).
    CPU and memory have no borrowingLimit in a cohort: a flavor's jobs may borrow them from the same flavor's
    unused CPU and memory in the cohort, while the GPUs' borrowingLimit bounds the burst.

    Reserved flavors come before spot ones: Kueue tries a group's flavors in order and, with whenCanBorrow
    MayStopSearch and whenCanPreempt TryNextFlavor, moves on to the next only when one is full and would need
    preemption (kueue pkg/scheduler/flavorassigner/flavorassigner.go, shouldTryNextFlavor), so spot is where a job
    lands once reserved capacity is used up. A fair-sharing weight other than 1 is written
    (apis/kueue/v1beta2 FairSharing.Weight; the default is 1). `queue_limit_problem` keeps a team within the CRD's
    limits of one group."""
    gpus = sorted({quota.flavor.resource_name for quota in team.quotas})
    flavors = []
    for quota in sorted(team.quotas, key=lambda q: (q.flavor.spot, q.flavor.name)):
        resources = [{"name": "cpu", "nominalQuota": _quantity("cpu", quota.cpu_cores)},
                     {"name": "memory", "nominalQuota": _quantity("memory", quota.memory_gib)}]
        for resource in gpus:
            own = resource == quota.flavor.resource_name
            entry = {"name": resource, "nominalQuota": str(quota.guaranteed if own else 0)}
            if team.cohort:
                entry["borrowingLimit"] = str(quota.burst if own else 0)
            resources.append(entry)
        flavors.append({"name": quota.flavor.name, "resources": resources})
    groups = [{"coveredResources": ["cpu", "memory", *gpus], "flavors": flavors}] if flavors else []
    fungibility = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    spec = {
        "namespaceSelector": {"matchLabels": {NS_NAME_LABEL: team.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "resourceGroups": groups,
        "stopPolicy": "Hold" if team.held else "None",
    }
    if any(q.flavor.spot for q in team.quotas):
        spec["flavorFungibility"] = fungibility
    if team.weight != 1:
        spec["fairSharing"] = {"weight": str(team.weight)}
    if team.admission_checks:  # v1beta2 lists checks only through the strategy (the plain list is v1beta1's)
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in team.admission_checks]}
    if team.cohort:
        spec = {"cohortName": team.cohort, **spec}
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": team.queue_name, "labels": team_labels(team.slug)},
        "spec": spec,
    }


# --- the portal's budget check: it is the controller of this AdmissionCheck ------------------------------------

BUDGET_CHECK = "gpu-portal-budget"
BUDGET_CONTROLLER = "gpu-portal.io/budget"


def budget_check_manifest() -> dict:
    """The AdmissionCheck the ClusterQueues of teams under a hard budget or an allowance list
    (apis/kueue/v1beta2/admissioncheck_types.go); its controller, the portal, keeps it Active."""
    return {"apiVersion": KUEUE, "kind": "AdmissionCheck",
            "metadata": {"name": BUDGET_CHECK, "labels": cluster_labels()},
            "spec": {"controllerName": BUDGET_CONTROLLER}}


def budget_check_active_status(now: str) -> dict:
    """The Active condition a check's controller sets: a ClusterQueue listing a check that is missing or not
    Active is inactive and admits nothing (pkg/cache/scheduler/clusterqueue.go, AdmissionCheckInactive)."""
    return {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": BUDGET_CHECK},
            "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active",
                                       "message": "The GPU portal checks budgets and allowances",
                                       "lastTransitionTime": now, "observedGeneration": 1}]}}


def workload_check_status(workload: dict, *, state: str, message: str, now: str, requeue_after: int = 0) -> dict:
    """The portal's entry in a Workload's status.admissionChecks (a map keyed by name: the apply owns only it);
    a Retry says when to queue again (requeueAfterSeconds, KEP-3258)."""
    meta = workload["metadata"]
    entry = {"name": BUDGET_CHECK, "state": state, "message": message, "lastTransitionTime": now}
    if requeue_after:
        entry["requeueAfterSeconds"] = requeue_after
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "status": {"admissionChecks": [entry]}}


def local_queue_manifest(team: TeamQuotaSpec) -> dict:
    """The team's weight, other than 1, also weighs its LocalQueue's decayed usage where Kueue runs admission
    fair sharing (apis/kueue/v1beta2 LocalQueueSpec.FairSharing; `kueue_fairshare`)."""
    spec = {"clusterQueue": team.queue_name, "stopPolicy": "Hold" if team.held else "None"}
    if team.weight != 1:
        spec["fairSharing"] = {"weight": str(team.weight)}
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": spec,
    }


# --- jobs ----------------------------------------------------------------------------------------------------


def rendezvous_env(spec) -> list[dict]:
    """torchrun's c10d rendezvous: worker 0's stable DNS name through the headless Service."""
    index = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    return [
        {"name": "MASTER_ADDR", "value": f"{spec.name}-0.{spec.name}"},
        {"name": "MASTER_PORT", "value": str(RENDEZVOUS_PORT)},
        {"name": "WORLD_SIZE", "value": str(spec.workers)},
        {"name": "RANK", "valueFrom": index},
        {"name": "PET_NNODES", "value": str(spec.workers)},
        {"name": "PET_NPROC_PER_NODE", "value": str(max(1, spec.gpus_per_worker))},
        {"name": "PET_NODE_RANK", "valueFrom": index},
        {"name": "PET_RDZV_BACKEND", "value": "c10d"},
        {"name": "PET_RDZV_ENDPOINT", "value": f"{spec.name}-0.{spec.name}:{RENDEZVOUS_PORT}"},
    ]


def headless_service_manifest(spec, parts) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": parts.metadata(spec, scheduling=False),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {parts.job_label: str(spec.job_id)},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT}],
        },
    }


def indexed_job_manifest(spec, parts, *, env: list[dict] | None = None, subdomain: str | None = None) -> dict:
    """All workers in one Job: Kueue admits it as one workload, so the gang is all or nothing."""
    extra = {"subdomain": subdomain} if subdomain else {}
    job_spec = {
        "parallelism": spec.workers,
        "completions": spec.workers,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "activeDeadlineSeconds": spec.max_runtime_seconds,
        "template": parts.template(spec, container="worker", env=env, **extra),
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": parts.metadata(spec), "spec": job_spec}
