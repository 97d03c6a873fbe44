"""The tenancy part of every team namespace's and cluster's desired state: the namespace, its access and
network isolation, and the priority classes of the tiers. Registered with portal.desired by the app config."""

from django.conf import settings
from django.db.models import Prefetch

from portal.desired import EVERY_SCHEDULER, Contribution

from .choices import Role, TeamState
from .manifests import TeamSpec, TierSpec, priority_class_manifest, team_access_manifests
from .models import Membership, PriorityTier, TeamNamespace
from .selectors import team_memberships


def team_spec(team, memberships) -> TeamSpec:
    editors = tuple(m.user.username for m in memberships if m.role in (Role.ADMIN, Role.MEMBER))
    viewers = tuple(m.user.username for m in memberships if m.role == Role.VIEWER)
    return TeamSpec(
        slug=team.slug,
        namespace=team.namespace,
        idp_group=team.idp_group,
        editors=editors,
        viewers=viewers,
        monitoring_namespace=settings.MONITORING_NAMESPACE,
    )


def tier_specs() -> list[TierSpec]:
    return [
        TierSpec(name=t.name, value=t.value, preemption_policy=t.preemption_policy, description=t.description)
        for t in PriorityTier.objects.order_by("-value")
    ]


def team_namespace_retired(team_namespace: TeamNamespace) -> bool:
    """An archived team whose namespace deletion was confirmed wants nothing in any cluster."""
    team = team_namespace.team
    return team.state == TeamState.ARCHIVED and bool(team.namespace_deletion_confirmed_at)


def team_access_objects(team_namespace: TeamNamespace, *, memberships=None, **given) -> list[dict]:
    team = team_namespace.team
    if memberships is None:
        memberships = list(team_memberships(team=team))
    return team_access_manifests(team_spec(team, memberships), access=team.state == TeamState.ACTIVE)


def tier_objects(cluster, *, tiers: list[TierSpec] | None = None, **given) -> list[dict]:
    return [priority_class_manifest(t) for t in (tiers if tiers is not None else tier_specs())]


def _prefetch(cluster) -> list[Prefetch]:
    # Into a list (`to_attr`): a related manager per row would clone a queryset per row.
    memberships = Membership.objects.select_related("user")
    return [Prefetch("team__memberships", queryset=memberships, to_attr="prefetched_memberships")]


CONTRIBUTION = Contribution(
    name="tenants",
    team_kinds={EVERY_SCHEDULER: [
        ("v1", "Namespace"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("networking.k8s.io/v1", "NetworkPolicy"),
    ]},
    cluster_kinds={EVERY_SCHEDULER: [("scheduling.k8s.io/v1", "PriorityClass")]},
    team_objects=team_access_objects,
    cluster_objects=tier_objects,
    retired=team_namespace_retired,
    shared=lambda cluster: {"tiers": tier_specs()},
    prefetch=_prefetch,
    given=lambda team_namespace: {"memberships": getattr(team_namespace.team, "prefetched_memberships", None)},
)
