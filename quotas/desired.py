"""The quota part of every team namespace's and cluster's desired state: the team's ResourceQuota and
LimitRange, its Kueue or Volcano queues, and the scheduler's shared objects. Registered with portal.desired by
the app config."""

from portal.desired import EVERY_SCHEDULER, Contribution
from tenants.choices import Scheduler
from tenants.desired import tier_specs

from .selectors import cluster_quota_objects, team_quota_objects


def team_namespace_quota_objects(team_namespace, *, quotas=None, flavors=None, **given) -> list[dict]:
    team, cluster = team_namespace.team, team_namespace.cluster
    if quotas is None:
        quotas = list(team.quotas.filter(flavor__cluster=cluster).select_related("flavor"))
    if flavors is None:
        flavors = list(cluster.flavors.order_by("name"))
    return team_quota_objects(team=team, cluster=cluster, quotas=quotas, flavors=flavors)


def cluster_scheduler_objects(cluster, *, tiers=None, **given) -> list[dict]:
    return cluster_quota_objects(cluster=cluster, tiers=tiers if tiers is not None else tier_specs())


CONTRIBUTION = Contribution(
    name="quotas",
    team_kinds={
        EVERY_SCHEDULER: [("v1", "ResourceQuota"), ("v1", "LimitRange")],
        Scheduler.KUEUE: [("kueue.x-k8s.io/v1beta2", "ClusterQueue"), ("kueue.x-k8s.io/v1beta2", "LocalQueue")],
        Scheduler.VOLCANO: [("scheduling.volcano.sh/v1beta1", "Queue")],
    },
    cluster_kinds={
        Scheduler.KUEUE: [
            ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
            ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
            ("kueue.x-k8s.io/v1beta2", "Cohort"),
            ("kueue.x-k8s.io/v1beta2", "Topology"),
        ],
        Scheduler.VOLCANO: [("scheduling.volcano.sh/v1beta1", "Queue")],
    },
    team_objects=team_namespace_quota_objects,
    cluster_objects=cluster_scheduler_objects,
)
