"""Pure builders for what a team's quota becomes in a cluster: core objects for both backends, then Kueue
(ClusterQueue, LocalQueue, ResourceFlavor, WorkloadPriorityClass, Cohort) or Volcano (Queue) objects.

Values in, plain dicts out, deterministic names. Quantities are strings in the API server's canonical form.
"""

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

from portal.naming import cluster_labels, dns_name, team_labels
from tenants.sharing import DEVICES_SUFFIX

KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO_SCHEDULING = "scheduling.volcano.sh/v1beta1"
CPU_FLAVOR = "gpu-portal-cpu"
LOCAL_QUEUE = "default"  # Kueue's webhook also sends unlabelled jobs to a LocalQueue named "default"
RESOURCE_QUOTA = "gpu-portal-quota"
LIMIT_RANGE = "gpu-portal-limits"
NS_NAME_LABEL = "kubernetes.io/metadata.name"
TOPOLOGY_PREFIX = "gpu-portal-"  # the cluster's one Kueue Topology, named by every TAS ResourceFlavor


@dataclass(frozen=True)
class FlavorSpec:
    name: str
    resource_name: str
    gpus_per_node: int
    node_labels: dict = field(default_factory=dict)
    node_taints: list = field(default_factory=list)
    tolerations: list = field(default_factory=list)
    spot: bool = False
    topology: str = ""  # the Kueue Topology its nodes are described by (TAS), when the cluster has levels
    device_class: str = ""  # a DRA flavor: resource_name is the logical name Kueue's deviceClassMappings give it

    @property
    def quota_key(self) -> str:
        """Its ResourceQuota entry: `requests.<extended resource>`, or a DRA class's devices (kubernetes v1.34
        pkg/quota/v1/evaluator/core/resource_claims.go: `<class>.deviceclass.resource.k8s.io/devices`)."""
        return f"{self.device_class}{DEVICES_SUFFIX}" if self.device_class else f"requests.{self.resource_name}"

    @property
    def volcano_key(self) -> str:
        """Its Volcano Queue resource: a DRA class counts as `deviceclass/<class>` (volcano v1.15.1
        pkg/scheduler/plugins/capacity/capacity.go, DeviceClassCountPrefix; the capacity plugin only)."""
        return f"deviceclass/{self.device_class}" if self.device_class else self.resource_name


@dataclass(frozen=True)
class QuotaSpec:
    flavor: FlavorSpec
    guaranteed: int
    burst: int
    cpu_cores: int = 0
    memory_gib: int = 0
    storage_gib: int = 0


@dataclass(frozen=True)
class TeamQuotaSpec:
    """A team's holdings in one cluster, with every GPU flavor the cluster offers (for zero limits)."""

    slug: str
    namespace: str
    quotas: tuple[QuotaSpec, ...]
    cluster_flavors: tuple[FlavorSpec, ...]
    cohort: str = ""
    held: bool = False  # a suspended team: admit nothing new
    weight: int = 1  # fair-sharing weight among the teams of its cohort / parent queue

    @property
    def queue_name(self) -> str:
        return dns_name(self.namespace)

    def totals(self) -> dict[str, int]:
        cpu = sum(q.cpu_cores for q in self.quotas)
        return {"cpu": cpu, "memory": sum(q.memory_gib for q in self.quotas),
                "storage": sum(q.storage_gib for q in self.quotas)}


def _gib(value: int) -> str:
    return f"{value}Gi"


def _gpu_resources(flavors) -> list[str]:
    return sorted({f.resource_name for f in flavors if not f.device_class})


def _quota_keys(flavors) -> list[str]:
    return sorted({f.quota_key for f in flavors})


# --- core, both backends -------------------------------------------------------------------------------------


def resource_quota_manifest(team: TeamQuotaSpec) -> dict:
    """GPU requests capped at guaranteed + burst; a GPU resource the team does not hold is capped at zero,
    since a resource a ResourceQuota does not list is unlimited. Only `requests.` is enforced for extended
    resources, so no `limits.` entries are emitted for GPUs."""
    per_key: dict[str, int] = defaultdict(int)
    for key in _quota_keys(team.cluster_flavors):
        per_key[key] = 0
    for quota in team.quotas:
        per_key[quota.flavor.quota_key] += quota.guaranteed + quota.burst
    hard = {key: str(per_key[key]) for key in sorted(per_key)}
    totals = team.totals()
    if totals["cpu"]:
        hard["requests.cpu"] = str(totals["cpu"])
    if totals["memory"]:
        hard["requests.memory"] = _gib(totals["memory"])
    if totals["storage"]:
        hard["requests.storage"] = _gib(totals["storage"])
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": RESOURCE_QUOTA, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": {"hard": hard},
    }


def limit_range_manifest(team: TeamQuotaSpec) -> dict:
    """Per-container GPU maximum with an explicit default of 0: without it the API server copies `max` into
    `default`, and every container that asks for no GPU would be given the maximum."""
    largest: dict[str, int] = defaultdict(int)
    for flavor in team.cluster_flavors:
        if not flavor.device_class:  # a DRA device is no container resource
            largest[flavor.resource_name] = max(largest[flavor.resource_name], flavor.gpus_per_node)
    gpus = sorted(largest)
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": LIMIT_RANGE, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "max": {name: str(largest[name]) for name in gpus},
                    "default": {"cpu": "1", "memory": "4Gi", **{name: "0" for name in gpus}},
                    "defaultRequest": {"cpu": "500m", "memory": "2Gi", **{name: "0" for name in gpus}},
                }
            ]
        },
    }


# --- Kueue ---------------------------------------------------------------------------------------------------


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


def cpu_resource_flavor_manifest() -> dict:
    """CPU and memory are covered by a flavor of their own, so each GPU group can list just its resource."""
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor",
            "metadata": {"name": CPU_FLAVOR, "labels": cluster_labels()}, "spec": {}}


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
    another Topology, and the one no flavor names any more is pruned (see `quotas.replacing`)."""
    return TOPOLOGY_PREFIX + hashlib.sha256("\n".join(node_labels).encode()).hexdigest()[:10]


def topology_manifest(node_labels: list[str]) -> dict:
    """The cluster's topology levels, broadest first (kueue v0.19.2 apis/kueue/v1beta2/topology_types.go)."""
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
    return _gib(value) if resource == "memory" else str(value)


def cluster_queue_manifest(team: TeamQuotaSpec) -> dict:
    """One resource group for CPU and memory, then one per GPU resource name with a flavor per GPU flavor the
    team holds: nominalQuota = guaranteed, borrowingLimit = burst (only inside a cohort, as Kueue requires).

    Reserved flavors come before spot ones in each group: Kueue tries a group's flavors in order and, with
    whenCanBorrow MayStopSearch and whenCanPreempt TryNextFlavor, moves on to the next only when one is full
    and would need preemption (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go,
    shouldTryNextFlavor), so spot is where a job lands once reserved capacity is used up. A fair-sharing
    weight other than 1 is written (apis/kueue/v1beta2 FairSharing.Weight; the default is 1)."""
    totals = team.totals()
    groups = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": CPU_FLAVOR,
                    "resources": [
                        {"name": "cpu", "nominalQuota": _quantity("cpu", totals["cpu"])},
                        {"name": "memory", "nominalQuota": _quantity("memory", totals["memory"])},
                    ],
                }
            ],
        }
    ]
    by_resource: dict[str, list[QuotaSpec]] = defaultdict(list)
    for quota in team.quotas:
        by_resource[quota.flavor.resource_name].append(quota)
    for resource in sorted(by_resource):
        flavors = []
        for quota in sorted(by_resource[resource], key=lambda q: (q.flavor.spot, q.flavor.name)):
            entry = {"name": resource, "nominalQuota": str(quota.guaranteed)}
            if team.cohort:
                entry["borrowingLimit"] = str(quota.burst)
            flavors.append({"name": quota.flavor.name, "resources": [entry]})
        groups.append({"coveredResources": [resource], "flavors": flavors})
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
    if team.cohort:
        spec = {"cohortName": team.cohort, **spec}
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": team.queue_name, "labels": team_labels(team.slug)},
        "spec": spec,
    }


def local_queue_manifest(team: TeamQuotaSpec) -> dict:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": {"clusterQueue": team.queue_name, "stopPolicy": "Hold" if team.held else "None"},
    }


# --- Volcano -------------------------------------------------------------------------------------------------


def _volcano_resources(quotas, amount) -> dict[str, str]:
    per_resource: dict[str, int] = defaultdict(int)
    cpu = memory = 0
    for quota in quotas:
        per_resource[quota.flavor.volcano_key] += amount(quota)
        cpu += quota.cpu_cores
        memory += quota.memory_gib
    resources = {name: str(per_resource[name]) for name in sorted(per_resource)}
    if cpu:
        resources["cpu"] = str(cpu)
    if memory:
        resources["memory"] = _gib(memory)
    return resources


def volcano_queue_manifest(team: TeamQuotaSpec, *, parent: str = "") -> dict:
    """guarantee = guaranteed ≤ deserved = guaranteed ≤ capability = guaranteed + burst, per resource name.

    Volcano knows resources, not flavors: two flavors with the same resource name add up. A held (suspended)
    team gets a capability of zero: Volcano has no spec field to close a queue (state lives in status)."""
    if team.held:
        zero = {name: "0" for name in sorted({f.volcano_key for f in team.cluster_flavors})}
        spec = {"weight": team.weight, "reclaimable": True, "capability": zero}
    else:
        guaranteed = _volcano_resources(team.quotas, lambda q: q.guaranteed)
        spec = {
            "weight": team.weight,
            "reclaimable": True,
            "capability": _volcano_resources(team.quotas, lambda q: q.guaranteed + q.burst),
            "deserved": guaranteed,
            "guarantee": {"resource": guaranteed},
        }
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": VOLCANO_SCHEDULING,
        "kind": "Queue",
        "metadata": {"name": team.queue_name, "labels": team_labels(team.slug)},
        "spec": spec,
    }


def department_queue_name(slug: str) -> str:
    """Distinct from team queue names: a department is a team too and may hold a queue of its own."""
    return dns_name(slug, "dept")


def volcano_department_queue_manifest(*, name: str, children: list[TeamQuotaSpec], parent: str = "",
                                      weight: int = 1) -> dict:
    """A department's queue bounds its teams: Volcano requires Σ children's deserved/guarantee ≤ the parent's."""
    return volcano_parent_queue_manifest(name=department_queue_name(name), teams=children, parent=parent,
                                         weight=weight)


def volcano_parent_queue_manifest(*, name: str, teams: list[TeamQuotaSpec], parent: str = "",
                                  weight: int = 1) -> dict:
    """A queue holding no jobs of its own, sized to the teams beneath it: guarantee and deserved are the sums of
    theirs (volcano v1.15.1 pkg/webhooks/admission/queues/validate refuses a parent below its children's sums),
    capability the sum of theirs (at least the largest, as the same webhook requires of an ancestor)."""
    quotas = [q for team in teams if not team.held for q in team.quotas]
    guaranteed = _volcano_resources(quotas, lambda q: q.guaranteed)
    spec = {
        "weight": weight,
        "reclaimable": True,
        "capability": _volcano_resources(quotas, lambda q: q.guaranteed + q.burst),
        "deserved": guaranteed,
        "guarantee": {"resource": guaranteed},
    }
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": VOLCANO_SCHEDULING,
        "kind": "Queue",
        "metadata": {"name": name, "labels": cluster_labels()},
        "spec": spec,
    }


def volcano_queue_widened(desired: dict, live: dict | None) -> dict:
    """A queue at least as large as it is now and as it is to be, resource by resource: what a parent queue can
    be set to before the queues under it grow or shrink, in whichever direction each resource goes (the exact
    size follows once they have)."""
    if live is None or desired["kind"] != "Queue":
        return desired
    from kubernetes.utils import parse_quantity  # the client is imported lazily (portal.kube)

    def wider(wanted: dict | None, current: dict | None) -> dict:
        merged = dict(current or {})
        for name, value in (wanted or {}).items():
            if name not in merged or parse_quantity(value) >= parse_quantity(merged[name]):
                merged[name] = value
        return merged

    spec, now = dict(desired["spec"]), live.get("spec") or {}
    for part in ("capability", "deserved"):
        spec[part] = wider(spec.get(part), now.get(part))
    spec["guarantee"] = {"resource": wider((spec.get("guarantee") or {}).get("resource"),
                                           (now.get("guarantee") or {}).get("resource"))}
    return {**desired, "spec": spec}


# Volcano's queue webhook (volcano v1.15.1 pkg/webhooks/admission/queues/validate/validate_queue.go) judges a queue's
# hierarchy against its parent and children as they are now: these refusals lift once the other queue has
# converged (a parent grown, a child shrunk, a department queue created), so they are retried with backoff.
VOLCANO_QUEUE_WEBHOOK = 'admission webhook "validatequeue.volcano.sh" denied the request'
VOLCANO_WAITING_ON_ANOTHER_QUEUE = ("exceeds parent's", "exceeds its ancestor's capability",
                                    "smaller than its descendants'", "failed to get parent queue",
                                    "parent queue ")


def volcano_queue_refusal_waits(status: int, message: str) -> bool:
    """Whether a refusal is Volcano's queue webhook waiting on another queue (retry), not a malformed queue."""
    if status not in (400, 403, 422) or VOLCANO_QUEUE_WEBHOOK not in message:
        return False
    reason = message.split(VOLCANO_QUEUE_WEBHOOK, 1)[1]
    return any(phrase in reason for phrase in VOLCANO_WAITING_ON_ANOTHER_QUEUE)
