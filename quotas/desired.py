"""The quota part of every team namespace's and cluster's desired state: the team's ResourceQuota and
LimitRange, its Kueue or Volcano queues, and the scheduler's shared objects, built from the rows by the pure
builders in `manifests`. Registered with portal.desired by the app config."""

from dataclasses import replace

from portal.desired import EVERY_SCHEDULER, Contribution
from tenants.choices import Scheduler, Sharing, TeamState
from tenants.desired import tier_specs
from tenants.manifests import priority_class_name
from tenants.models import Cluster, GpuFlavor, Team

from . import manifests as m

TAS_SHARING = (Sharing.EXCLUSIVE, Sharing.MIG)  # whole devices a node has so many of: what Kueue's TAS places
ROOT_QUEUE = "root"


def flavor_spec(flavor: GpuFlavor, strategy: str, topology: str = "") -> m.FlavorSpec:
    """The flavor as the cluster's MIG strategy schedules it (a MIG slice is nvidia.com/gpu under `single`)."""
    return m.FlavorSpec(
        spot=flavor.spot,
        topology=topology,
        name=flavor.name,
        resource_name=flavor.scheduled_resource(strategy),
        gpus_per_node=flavor.gpus_per_node,
        node_labels=flavor.scheduled_node_labels(strategy),
        node_taints=flavor.node_taints,
        tolerations=flavor.tolerations,
        device_class=flavor.device_class if flavor.sharing == Sharing.DRA else "",
    )


def parent_name(team: Team, cluster: Cluster) -> str:
    """Kueue cohort / Volcano parent queue a team's queue joins: its department's, else the cluster's."""
    if team.parent_id:
        return team.parent.slug if cluster.scheduler == Scheduler.KUEUE else m.department_queue_name(team.parent.slug)
    if cluster.scheduler == Scheduler.VOLCANO and cluster.cohort == ROOT_QUEUE:
        return ""
    return cluster.cohort


def team_quota_spec(*, team: Team, cluster: Cluster, quotas, flavors) -> m.TeamQuotaSpec:
    return m.TeamQuotaSpec(
        slug=team.slug,
        namespace=team.namespace,
        quotas=tuple(
            m.QuotaSpec(flavor=flavor_spec(q.flavor, cluster.mig_strategy), guaranteed=q.guaranteed, burst=q.burst,
                        cpu_cores=q.cpu_cores,
                        memory_gib=q.memory_gib, storage_gib=q.storage_gib)
            for q in sorted(quotas, key=lambda q: q.flavor.name)
            if q.flavor.cluster_id == cluster.pk and (q.guaranteed or q.burst)
        ),
        cluster_flavors=tuple(flavor_spec(f, cluster.mig_strategy) for f in flavors),
        cohort=parent_name(team, cluster),
        held=team.state != TeamState.ACTIVE,
        weight=team.fair_share_weight,
    )


def team_quota_objects(*, team: Team, cluster: Cluster, quotas, flavors) -> list[dict]:
    """The quota objects of one team in one cluster; queues only while the team holds something there. A Kueue
    flavor being made again (`quotas.replacing`) is left out of the ClusterQueue until it is back."""
    spec = team_quota_spec(team=team, cluster=cluster, quotas=quotas, flavors=flavors)
    objects = [m.resource_quota_manifest(spec), m.limit_range_manifest(spec)]
    if not spec.quotas:
        return objects
    if cluster.scheduler == Scheduler.KUEUE:
        replacing = set(cluster.replacing_flavors)
        queue = replace(spec, quotas=tuple(q for q in spec.quotas if q.flavor.name not in replacing)) \
            if replacing else spec
        objects += [m.cluster_queue_manifest(queue), m.local_queue_manifest(spec)]
    else:
        objects.append(m.volcano_queue_manifest(spec, parent=spec.cohort))
    return objects


def cluster_quota_objects(*, cluster: Cluster, tiers) -> list[dict]:
    """Cluster-wide scheduler objects: Kueue flavors, priority classes and department cohorts, or Volcano
    department queues."""
    flavors = list(cluster.flavors.order_by("name"))
    departments = list(
        Team.objects.filter(children__isnull=False).exclude(state=TeamState.ARCHIVED).distinct().order_by("slug")
    )
    if cluster.scheduler == Scheduler.KUEUE:
        labels = [level["node_label"] for level in cluster.topology_levels]
        topology = m.topology_name(labels) if labels else ""
        objects = [m.cpu_resource_flavor_manifest()] + [
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
        return objects
    objects = []
    specs = _team_specs(cluster, flavors)
    parent = "" if cluster.cohort in ("", ROOT_QUEUE) else cluster.cohort
    if parent:
        # Volcano has no implicit parents (as Kueue has cohorts): the cluster's parent queue is the portal's to
        # create and size, above every team queue and department queue of the cluster.
        objects.append(m.volcano_parent_queue_manifest(name=parent, teams=[spec for _, spec in specs]))
    for department in departments:
        children = [spec for parent_id, spec in specs if parent_id == department.pk]
        objects.append(m.volcano_department_queue_manifest(name=department.slug, children=children, parent=parent,
                                                           weight=department.fair_share_weight))
    return objects


def _team_specs(cluster: Cluster, flavors) -> list[tuple[int | None, m.TeamQuotaSpec]]:
    """Each team holding quota in the cluster, with its department's id."""
    teams = (Team.objects.filter(quotas__flavor__cluster=cluster).exclude(state=TeamState.ARCHIVED).distinct()
             .order_by("slug").prefetch_related("quotas__flavor"))
    return [(team.parent_id, team_quota_spec(team=team, cluster=cluster, quotas=team.quotas.all(), flavors=flavors))
            for team in teams]



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
