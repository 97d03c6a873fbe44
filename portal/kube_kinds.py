"""The kinds the portal reads or writes in a cluster, with their plural and scope (`kube.KINDS`)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    plural: str
    namespaced: bool


# Every kind the portal reads or writes. A static table keeps the gateway free of discovery round-trips and
# documents exactly what the portal's ClusterRole must allow.
KINDS: dict[tuple[str, str], Kind] = {
    ("v1", "Namespace"): Kind("namespaces", False),
    ("v1", "ResourceQuota"): Kind("resourcequotas", True),
    ("v1", "LimitRange"): Kind("limitranges", True),
    ("v1", "Service"): Kind("services", True),
    ("v1", "Pod"): Kind("pods", True),
    ("v1", "Event"): Kind("events", True),
    ("v1", "Node"): Kind("nodes", False),  # only where a Volcano HyperNode chooses its nodes by label
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): Kind("rolebindings", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): Kind("networkpolicies", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): Kind("priorityclasses", False),
    ("batch/v1", "Job"): Kind("jobs", True),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): Kind("resourceflavors", False),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): Kind("clusterqueues", False),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): Kind("localqueues", True),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"): Kind("workloadpriorityclasses", False),
    ("kueue.x-k8s.io/v1beta2", "Cohort"): Kind("cohorts", False),
    ("kueue.x-k8s.io/v1beta2", "Workload"): Kind("workloads", True),
    ("kueue.x-k8s.io/v1beta2", "Topology"): Kind("topologies", False),
    ("scheduling.volcano.sh/v1beta1", "Queue"): Kind("queues", False),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): Kind("podgroups", True),
    ("topology.volcano.sh/v1alpha1", "HyperNode"): Kind("hypernodes", False),
    ("batch.volcano.sh/v1alpha1", "Job"): Kind("jobs", True),
    ("ray.io/v1", "RayJob"): Kind("rayjobs", True),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): Kind("resourceclaimtemplates", True),
    ("resource.k8s.io/v1", "ResourceClaim"): Kind("resourceclaims", True),
}
