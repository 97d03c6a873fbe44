"""The kinds the portal reads or writes in a cluster, with their plural and scope (`kube.KINDS`)."""

from dataclasses import dataclass

from .upstream import KUEUE_API, RAY_API, VOLCANO_BATCH_API, VOLCANO_SCHEDULING_API, VOLCANO_TOPOLOGY_API


@dataclass(frozen=True)
class Kind:
    plural: str
    namespaced: bool
    # Read only from sandbox clusters (their synthetic usage source), where no RBAC applies: not in the ClusterRole.
    sandbox_only: bool = False


# Every kind the portal reads or writes. A static table keeps the gateway free of discovery round-trips and
# documents exactly what the portal's ClusterRole must allow.
KINDS: dict[tuple[str, str], Kind] = {
    ("v1", "Namespace"): Kind("namespaces", False),
    ("v1", "ResourceQuota"): Kind("resourcequotas", True),
    ("v1", "LimitRange"): Kind("limitranges", True),
    ("v1", "Service"): Kind("services", True),
    ("v1", "Pod"): Kind("pods", True),
    ("v1", "PersistentVolumeClaim"): Kind("persistentvolumeclaims", True),  # a workspace's home volume
    ("v1", "Event"): Kind("events", True),
    ("v1", "Node"): Kind("nodes", False),  # HyperNode members chosen by label; topology domains' GPUs (estimates)
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): Kind("rolebindings", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): Kind("networkpolicies", True),
    ("networking.k8s.io/v1", "Ingress"): Kind("ingresses", True),  # a workspace's way in, where hosts are given
    ("scheduling.k8s.io/v1", "PriorityClass"): Kind("priorityclasses", False),
    ("batch/v1", "Job"): Kind("jobs", True),
    (KUEUE_API, "ResourceFlavor"): Kind("resourceflavors", False),
    (KUEUE_API, "ClusterQueue"): Kind("clusterqueues", False),
    (KUEUE_API, "LocalQueue"): Kind("localqueues", True),
    (KUEUE_API, "WorkloadPriorityClass"): Kind("workloadpriorityclasses", False),
    (KUEUE_API, "Cohort"): Kind("cohorts", False),
    (KUEUE_API, "Workload"): Kind("workloads", True),
    (KUEUE_API, "Topology"): Kind("topologies", False),
    (KUEUE_API, "AdmissionCheck"): Kind("admissionchecks", False),  # the portal's budget check (it is its controller)
    (VOLCANO_SCHEDULING_API, "Queue"): Kind("queues", False),
    (VOLCANO_SCHEDULING_API, "PodGroup"): Kind("podgroups", True),
    (VOLCANO_TOPOLOGY_API, "HyperNode"): Kind("hypernodes", False),
    (VOLCANO_BATCH_API, "Job"): Kind("jobs", True),
    (RAY_API, "RayJob"): Kind("rayjobs", True),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): Kind("resourceclaimtemplates", True),
    ("resource.k8s.io/v1", "ResourceClaim"): Kind("resourceclaims", True, sandbox_only=True),  # billing.sandbox_usage
}
