"""The quota part of every team namespace's and cluster's desired state: the team's ResourceQuota and
LimitRange (the pure builders in `manifests`), its queues and the scheduler's shared objects (the cluster's
backend's). Registered with portal.desired by the app config."""

from django.db.models import Prefetch

from backends import backend_for, backends
from backends.specs import QuotaSpec, TeamQuotaSpec, flavor_spec
from portal.desired import EVERY_SCHEDULER, Contribution
from tenants.choices import TeamState
from tenants.desired import tier_specs
from tenants.models import Cluster, Team

from . import manifests as m
from .models import Quota
from .services import cluster_flavors_remaking
from .usage import record_usage

_admission_checks: list = []


def register_admission_checks(source) -> None:
    """`source(team, cluster)` → the admission checks the team's queue in the cluster lists. Billing (a layer above)
    registers its budget check, listed for the teams under a hard budget or an allowance."""
    _admission_checks[:] = [source]


def admission_checks(team: Team, cluster: Cluster) -> tuple[str, ...]:
    return tuple(_admission_checks[0](team, cluster)) if _admission_checks else ()


def parent_name(team: Team, cluster: Cluster) -> str:
    """Kueue cohort / Volcano parent queue a team's queue joins: its department's, else the cluster's."""
    return backend_for(cluster).team_parent(cluster, team.parent.slug if team.parent_id else None)


def team_quota_spec(*, team: Team, cluster: Cluster, quotas, flavors) -> TeamQuotaSpec:
    return TeamQuotaSpec(
        slug=team.slug,
        namespace=team.namespace,
        quotas=tuple(
            QuotaSpec(flavor=flavor_spec(q.flavor, cluster.mig_strategy), guaranteed=q.guaranteed, burst=q.burst,
                        cpu_cores=q.cpu_cores,
                        memory_gib=q.memory_gib, storage_gib=q.storage_gib)
            for q in sorted(quotas, key=lambda q: q.flavor.name)
            if q.flavor.cluster_id == cluster.pk and (q.guaranteed or q.burst)
        ),
        cluster_flavors=tuple(flavor_spec(f, cluster.mig_strategy) for f in flavors),
        cohort=parent_name(team, cluster),
        held=team.state != TeamState.ACTIVE,
        weight=team.fair_share_weight,
        admission_checks=admission_checks(team, cluster),
    )


def team_quota_objects(*, team: Team, cluster: Cluster, quotas, flavors) -> list[dict]:
    """The quota objects of one team in one cluster; its scheduler's queues only while the team holds something
    there."""
    spec = team_quota_spec(team=team, cluster=cluster, quotas=quotas, flavors=flavors)
    objects = [m.resource_quota_manifest(spec), m.limit_range_manifest(spec)]
    if not spec.quotas:
        return objects
    return objects + backend_for(cluster).team_queue_objects(spec, cluster)


def cluster_quota_objects(*, cluster: Cluster, tiers, flavors=None) -> list[dict]:
    """Cluster-wide scheduler objects: Kueue flavors, priority classes and department cohorts, or Volcano
    department queues."""
    if flavors is None:
        flavors = list(cluster.flavors.order_by("name"))
    departments = list(
        Team.objects.filter(children__isnull=False).exclude(state=TeamState.ARCHIVED).distinct().order_by("slug")
    )
    return backend_for(cluster).cluster_objects(cluster, flavors=flavors, departments=departments, tiers=tiers,
                                                team_specs=lambda: _team_specs(cluster, flavors))


def _team_specs(cluster: Cluster, flavors) -> list[tuple[int | None, TeamQuotaSpec]]:
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


def cluster_scheduler_objects(cluster, *, tiers=None, flavors=None, **given) -> list[dict]:
    return cluster_quota_objects(cluster=cluster, tiers=tiers if tiers is not None else tier_specs(), flavors=flavors)


# --- what the composition layer asks of the quota part (portal.desired's hooks) ------------------------------


def _shared(cluster) -> dict:
    return {"flavors": list(cluster.flavors.order_by("name"))}


def _prefetch(cluster) -> list[Prefetch]:
    # Into lists (`to_attr`): a related manager per row would clone a queryset per row.
    quotas = Quota.objects.filter(flavor__cluster=cluster).select_related("flavor")
    return [Prefetch("team__quotas", queryset=quotas, to_attr="prefetched_quotas")]


def _given(team_namespace) -> dict:
    return {"quotas": getattr(team_namespace.team, "prefetched_quotas", None)}


def _prepare(cluster, desired: list[dict], actual: list[dict], *, widen: bool) -> list[dict]:
    """As the cluster's scheduler can take them now (`Backend.prepare_cluster`); flavors it must make again are
    recorded on the cluster, so the teams' queues leave them out meanwhile."""
    prepared = backend_for(cluster).prepare_cluster(desired, actual, widen=widen)
    if prepared.remaking is not None:
        cluster_flavors_remaking(cluster=cluster, names=prepared.remaking)
    return prepared.desired


def _order(cluster, objects: list[dict], *, children_first: bool) -> list[list[dict]]:
    return backend_for(cluster).apply_levels(objects, children_first=children_first)


def _unsettled(cluster) -> bool:
    return bool(cluster.replacing_flavors)  # its scheduler lets them go once no queue lists them: look again soon


def _nested(cluster) -> bool:
    return backend_for(cluster).queues_under_cluster_queues


CONTRIBUTION = Contribution(
    name="quotas",
    team_kinds={EVERY_SCHEDULER: [("v1", "ResourceQuota"), ("v1", "LimitRange")],
                **{backend.name: backend.team_kinds for backend in backends()}},
    cluster_kinds={backend.name: backend.cluster_kinds for backend in backends()},
    team_objects=team_namespace_quota_objects,
    cluster_objects=cluster_scheduler_objects,
    shared=_shared,
    prefetch=_prefetch,
    given=_given,
    record=record_usage,
    prepare=_prepare,
    order=_order,
    unsettled=_unsettled,
    nested=_nested,
)
