"""Every read of tenancy data, already scoped to the user asking: another team's row is simply not found."""

import functools
import hmac
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Prefetch, QuerySet
from django.http import Http404

from portal import kube, sql
from portal.http import is_platform_admin  # noqa: F401 - re-exported: the reads of every app use it from here

from . import cluster_parts, topology
from .choices import Role, TeamState
from .models import AccessToken, AuditEvent, Cluster, GpuFlavor, Membership, PriorityTier, Team, TeamNamespace
from .tokens import split_token, token_digest


def team_list(*, user) -> QuerySet[Team]:
    teams = Team.objects.all()
    if not is_platform_admin(user):
        teams = teams.filter(memberships__user=user)
        scoped = getattr(user, TOKEN_TEAMS_ATTR, None)
        if scoped is not None:  # a token limited to some of the user's teams
            teams = teams.filter(pk__in=scoped)
    return teams.order_by("slug")


# A user loaded by access_token_for_secret carries its team ids, read in the same query as the token: the API
# then scopes a request's reads without another query. Only that lookup sets it, on a user object made for one
# request, so it cannot outlive a membership change.
TEAM_IDS_ATTR = "_visible_team_ids"
# Set beside it when the token is limited to some teams: what team_list and team_role narrow to.
TOKEN_TEAMS_ATTR = "_token_team_ids"


def visible_team_ids(*, user) -> list[int] | None:
    """The ids of the teams the user may see, or None for every team (platform admins).

    Large tables (jobs) filter on these ids as literals rather than on a subquery: PostgreSQL then walks the
    (team, submitted_at) index of just those teams, instead of the newest rows of every team until enough of the
    user's turn up (a small team's page used to read every job of the platform), and plans in a fraction of the
    time.
    """
    if is_platform_admin(user):
        return None
    known = getattr(user, TEAM_IDS_ATTR, None)  # read with the user's token, in the same query
    if known is not None:
        return known
    return list(Membership.objects.filter(user=user).values_list("team_id", flat=True))


def team_get(*, user, slug: str) -> Team:
    team = team_list(user=user).filter(slug=slug).first()
    if team is None:
        raise Http404("No such team")
    return team


def team_role(*, user, team: Team) -> str | None:
    """The user's role in the team; platform admins act as team admins everywhere."""
    if is_platform_admin(user):
        return Role.ADMIN
    scoped = getattr(user, TOKEN_TEAMS_ATTR, None)
    if scoped is not None and team.pk not in scoped:
        return None
    membership = Membership.objects.filter(user=user, team=team).only("role").first()
    return membership.role if membership else None


def known_usernames(*, user) -> list[str]:
    """The members of the user's teams (every member, for platform admins), for choosing whom to filter by."""
    memberships = Membership.objects.all()
    if not is_platform_admin(user):
        memberships = memberships.filter(team__in=team_list(user=user))
    return list(memberships.order_by("user__username").values_list("user__username", flat=True).distinct())


def known_flavor_names() -> list[str]:
    return list(GpuFlavor.objects.order_by("name").values_list("name", flat=True).distinct())


def submit_team_list(*, user) -> QuerySet[Team]:
    """The active teams the user may submit jobs for (members and team admins; platform admins act as admins)."""
    teams = team_list(user=user).filter(state=TeamState.ACTIVE)
    if not is_platform_admin(user):
        teams = teams.filter(memberships__user=user, memberships__role__in=(Role.ADMIN, Role.MEMBER))
    return teams


def queue_cluster_list(*, user) -> list[Cluster]:
    """The active clusters whose queues the user may look at: all for platform admins, else where a team of hers
    has a namespace."""
    clusters = Cluster.objects.filter(active=True).order_by("name")
    if not is_platform_admin(user):
        clusters = clusters.filter(team_namespaces__team__in=team_list(user=user),
                                   team_namespaces__deleted_at__isnull=True)
    return list(clusters.distinct())


def member_team_list(*, user) -> QuerySet[Team]:
    """The teams the user is a member of (whatever the role), for limiting a token to some of them."""
    return Team.objects.filter(memberships__user=user).order_by("slug")


def team_admin_names(*, team: Team) -> list[str]:
    """Whom a viewer asks for what she may not do herself."""
    return list(team.memberships.filter(role=Role.ADMIN).order_by("user__username")
                .values_list("user__username", flat=True))


def viewer_team_list(*, user) -> QuerySet[Team]:
    """The teams the user only views (she may read but not submit or request)."""
    return team_list(user=user).filter(memberships__user=user, memberships__role=Role.VIEWER)


def can_manage_members(*, user, team: Team) -> bool:
    return team_role(user=user, team=team) == Role.ADMIN and team.state != TeamState.ARCHIVED


def dashboard_teams(*, user) -> QuerySet[Team]:
    """My teams with their namespaces' sync state, in a fixed number of queries."""
    namespaces = TeamNamespace.objects.select_related("cluster").order_by("cluster__name")
    return team_list(user=user).prefetch_related(Prefetch("namespaces", queryset=namespaces))


def team_memberships(*, team: Team) -> QuerySet[Membership]:
    return team.memberships.select_related("user").order_by("role", "user__username")


def active_user_named(username: str):
    """The active user of that username, or None: whom a team admin may add to a team."""
    return get_user_model().objects.filter(username=username, is_active=True).first()


def membership_named(*, team: Team, username: str) -> Membership | None:
    return team_memberships(team=team).filter(user__username=username).first()


def team_namespaces(*, team: Team) -> QuerySet[TeamNamespace]:
    return team.namespaces.select_related("cluster").order_by("cluster__name")


def team_namespace_in(*, team: Team, cluster_name: str) -> TeamNamespace:
    row = team_namespaces(team=team).filter(cluster__name=cluster_name).first()
    if row is None:
        raise Http404("The team has no namespace in that cluster")
    return row


def cluster_list() -> QuerySet[Cluster]:
    return Cluster.objects.order_by("name")


def active_clusters() -> QuerySet[Cluster]:
    return cluster_list().filter(active=True)


def cluster_get(*, name: str) -> Cluster:
    """With the settings other apps keep for it (cluster_parts), which its page shows."""
    cluster = Cluster.objects.select_related(*cluster_parts.related_names()).filter(name=name).first()
    if cluster is None:
        raise Http404("No such cluster")
    return cluster


def flavor_list(*, cluster: Cluster | None = None, cluster_name: str | None = None) -> QuerySet[GpuFlavor]:
    flavors = GpuFlavor.objects.select_related("cluster")
    if cluster_name:
        flavors = flavors.filter(cluster__name=cluster_name)
    return flavors.filter(cluster=cluster) if cluster else flavors


def flavor_named(*, name: str, cluster: str | None = None) -> GpuFlavor:
    """A flavor by its name (and its cluster's, when several clusters have one of that name), as the API takes it;
    a ValidationError names the field that is wrong."""
    flavors = GpuFlavor.objects.select_related("cluster").filter(name=name)
    if cluster:
        flavors = flavors.filter(cluster__name=cluster)
    found = list(flavors[:2])
    if not found:
        raise ValidationError({"flavor": f"There is no flavor named {name!r}" + (f" in {cluster}." if cluster
                                                                                  else ".")})
    if len(found) > 1:
        raise ValidationError({"cluster": f"Flavors named {name!r} exist in several clusters: name the cluster."})
    return found[0]


def flavor_get(*, pk: int) -> GpuFlavor:
    flavor = flavor_list().filter(pk=pk).first()
    if flavor is None:
        raise Http404("No such flavor")
    return flavor


def tier_list() -> QuerySet[PriorityTier]:
    return PriorityTier.objects.all()


def tier_named(*, name: str) -> PriorityTier:
    """A priority tier by its name, as the API takes it; a ValidationError on `priority` when there is none."""
    tier = tier_list().filter(name=name).first()
    if tier is None:
        raise ValidationError({"priority": f"There is no priority tier named {name!r}."})
    return tier


def audit_event_list(*, user) -> QuerySet[AuditEvent]:
    events = AuditEvent.objects.select_related("actor", "team")
    if not is_platform_admin(user):
        events = events.filter(team__memberships__user=user)
    return events.order_by("-at", "-id")


def cluster_reachable(cluster: Cluster) -> tuple[bool, str]:
    try:
        return kube.client_for_cluster(cluster).reachable()
    except kube.KubeError as exc:
        return False, str(exc)


def live_object(*, cluster: Cluster, api_version: str, kind: str, name: str, namespace: str | None) -> dict | None:
    """The object as the cluster holds it now (None when absent); raises KubeError when it cannot be read."""
    return kube.client_for_cluster(cluster).get(api_version, kind, name, namespace)


def discovered_hypernodes(*, cluster) -> dict:
    """The HyperNodes Volcano's label discoverer made on the cluster, narrowest tier first (name, tier, the level
    and its node label, the value, how many members), and how they differ from the cluster's levels: `missing`, the
    levels (the node's own aside) no HyperNode was built for; `strays`, node labels HyperNodes were built from that
    are no level. Raises KubeError when the cluster cannot be read."""
    found = kube.client_for_cluster(cluster).list("topology.volcano.sh/v1alpha1", "HyperNode",
                                                  label_selector=f"{topology.VOLCANO_SOURCE_LABEL}=label")
    levels = {level["node_label"]: level["name"] for level in cluster.topology_levels or []}
    rows = []
    for hypernode in found:
        spec = hypernode.get("spec") or {}
        label = spec.get("tierName", "")
        rows.append({"name": hypernode["metadata"]["name"], "tier": spec.get("tier", 0), "label": label,
                     "level": levels.get(label, ""),
                     "value": (hypernode["metadata"].get("labels") or {}).get(label, ""),
                     "members": len(spec.get("members") or [])})
    built = {row["label"] for row in rows}
    missing = [name for label, name in levels.items() if label != topology.HOSTNAME_LABEL and label not in built]
    return {"rows": sorted(rows, key=lambda row: (row["tier"], row["value"], row["name"])),
            "missing": missing if rows else [],
            "strays": sorted({row["label"] for row in rows if not row["level"]})}


# --- personal access tokens -------------------------------------------------------------------------------------


def access_token_list(*, user) -> QuerySet[AccessToken]:
    return AccessToken.objects.filter(user=user).order_by("-created_at", "-id")


def access_token_get(*, user, pk: int) -> AccessToken:
    token = access_token_list(user=user).filter(pk=pk).first()
    if token is None:
        raise Http404("No such token")
    return token


def access_token_for_secret(raw: str) -> AccessToken | None:
    """The active token whose secret this is, with its user (and the user's team ids); None for anything else
    (unknown, revoked, expired, malformed). The prefix finds the row; the digest is compared in constant time.

    Every API request makes this read, so it is one hand-written SELECT (a row per membership) rather than a
    queryset; the password hash is left unread."""
    prefix = split_token(raw)
    if prefix is None:
        return None
    query = _token_query()
    rows = sql.fetch(query.select, [prefix], query.fields)
    if not rows or not hmac.compare_digest(rows[0][query.digest], token_digest(raw)):
        return None
    db, split = AccessToken.objects.db, len(query.token_names)
    token = AccessToken.from_db(db, query.token_names, rows[0][:split])
    token.user = get_user_model().from_db(db, query.user_names, rows[0][split:-1])
    if not token.is_active() or not token.user.is_active:
        return None
    member_of = [row[-1] for row in rows if row[-1] is not None]
    if token.team_ids:
        # Limited to some teams: only those, and never as a platform admin (this user object lives for one
        # request and is never saved).
        token.user.is_staff = token.user.is_superuser = False
        member_of = [team_id for team_id in member_of if team_id in token.team_ids]
        setattr(token.user, TOKEN_TEAMS_ATTR, member_of)
    setattr(token.user, TEAM_IDS_ATTR, member_of)
    return token


@dataclass(frozen=True)
class _TokenQuery:
    select: str
    fields: tuple  # the columns: the token's, its user's (but the password), a membership's team
    token_names: list[str]
    user_names: list[str]
    digest: int  # the digest's column


@functools.cache
def _token_query() -> _TokenQuery:
    user_model = get_user_model()
    token_fields = list(AccessToken._meta.concrete_fields)
    user_fields = [f for f in user_model._meta.concrete_fields if f.name != "password"]
    columns = [f't."{f.column}"' for f in token_fields] + [f'u."{f.column}"' for f in user_fields]
    select = (f'SELECT {", ".join(columns)}, m."team_id" FROM "{AccessToken._meta.db_table}" t '
              f'JOIN "{user_model._meta.db_table}" u ON u."id" = t."user_id" '
              f'LEFT JOIN "{Membership._meta.db_table}" m ON m."user_id" = u."id" WHERE t."prefix" = %s')
    return _TokenQuery(select=select, fields=(*token_fields, *user_fields, Membership._meta.get_field("team")),
                       token_names=[f.attname for f in token_fields], user_names=[f.attname for f in user_fields],
                       digest=token_fields.index(AccessToken._meta.get_field("digest")))
