"""Every write to tenancy data, and the reconcile of team namespaces and cluster-wide objects.

Writes validate, save, audit and bump the generation of what the cluster must change, inside one
transaction; the reconcile nudge is sent on commit. Reconcile itself is level-triggered: it computes the
desired objects from rows, compares them with what the cluster holds and writes only the difference.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.forms.models import model_to_dict
from django.utils import timezone

from portal import kube
from portal.naming import MANAGED_BY, MANAGED_BY_LABEL, TEAM_LABEL, cluster_scope_selector, team_selector
from portal.reconcile import Outcome, converge, converge_many, plan, record, record_many

from . import selectors
from .choices import MembershipSource, Role, Scheduler, TeamState
from .models import AccessToken, AuditEvent, Cluster, GpuFlavor, Membership, PriorityTier, Team, TeamNamespace

log = logging.getLogger(__name__)

# Kinds each reconciled row owns, by (apiVersion, kind). Cluster-scoped team objects carry the team label.
TEAM_KINDS = {
    "common": [
        ("v1", "Namespace"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("networking.k8s.io/v1", "NetworkPolicy"),
        ("v1", "ResourceQuota"),
        ("v1", "LimitRange"),
    ],
    Scheduler.KUEUE: [("kueue.x-k8s.io/v1beta2", "ClusterQueue"), ("kueue.x-k8s.io/v1beta2", "LocalQueue")],
    Scheduler.VOLCANO: [("scheduling.volcano.sh/v1beta1", "Queue")],
}
CLUSTER_KINDS = {
    "common": [("scheduling.k8s.io/v1", "PriorityClass")],
    Scheduler.KUEUE: [
        ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
        ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
        ("kueue.x-k8s.io/v1beta2", "Cohort"),
    ],
    Scheduler.VOLCANO: [("scheduling.volcano.sh/v1beta1", "Queue")],
}


def team_kinds(cluster: Cluster) -> list[tuple[str, str]]:
    return TEAM_KINDS["common"] + TEAM_KINDS[cluster.scheduler]


def cluster_kinds(cluster: Cluster) -> list[tuple[str, str]]:
    return CLUSTER_KINDS["common"] + CLUSTER_KINDS[cluster.scheduler]


# --- audit ---------------------------------------------------------------------------------------------------


def audit_record(*, actor, action: str, obj, team: Team | None = None, before=None, after=None,
                 source_ip: str | None = None) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        action=action,
        object_type=obj._meta.model_name,
        object_id=str(obj.pk),
        object_repr=str(obj)[:200],
        team=team,
        before=before,
        after=after,
        source_ip=source_ip,
    )


def _snapshot(obj, fields: list[str]) -> dict:
    data = model_to_dict(obj, fields=fields)
    return {k: (str(v) if not isinstance(v, (str, int, float, bool, type(None), dict, list)) else v)
            for k, v in data.items()}


# --- notifications -------------------------------------------------------------------------------------------


def notify_users(*, users, subject: str, body: str) -> None:
    """Email after commit (a rolled-back decision sends nothing); the task retries a failing mail server."""
    recipients = sorted({u.email for u in users if u is not None and u.email})
    if not recipients:
        return

    def enqueue():
        from .tasks import send_email_task

        send_email_task.delay(subject, body, recipients)

    transaction.on_commit(enqueue)


# --- reconcile nudges ----------------------------------------------------------------------------------------


def _lease() -> timezone.datetime:
    return timezone.now() + timedelta(seconds=settings.RECONCILE_LEASE_SECONDS)


def team_namespaces_touch(*, team_namespaces) -> None:
    """The cluster must change: bump generations now, nudge a worker once the transaction commits."""
    ids = list(team_namespaces.values_list("pk", flat=True))
    if not ids:
        return
    TeamNamespace.objects.filter(pk__in=ids).update(generation=F("generation") + 1, next_attempt_at=_lease())

    def enqueue():
        from .tasks import team_namespace_reconcile_task

        for pk in ids:
            team_namespace_reconcile_task.delay(pk)

    transaction.on_commit(enqueue)


def clusters_touch(*, clusters) -> None:
    ids = list(clusters.values_list("pk", flat=True))
    if not ids:
        return
    Cluster.objects.filter(pk__in=ids).update(generation=F("generation") + 1, next_attempt_at=_lease())

    def enqueue():
        from .tasks import cluster_reconcile_task

        for pk in ids:
            cluster_reconcile_task.delay(pk)

    transaction.on_commit(enqueue)


def reconcile_retry(*, actor, row, source_ip: str | None = None) -> None:
    """An explicit retry after a permanent error: reconcile again as if the row had changed."""
    with transaction.atomic():
        if isinstance(row, Cluster):
            clusters_touch(clusters=Cluster.objects.filter(pk=row.pk))
            team = None
        else:
            team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(pk=row.pk))
            team = row.team
        audit_record(actor=actor, action="reconcile.retry", obj=row, team=team, source_ip=source_ip)


# --- teams ---------------------------------------------------------------------------------------------------

TEAM_FIELDS = ["slug", "name", "cost_center", "idp_group", "parent", "state"]


@transaction.atomic
def team_create(*, actor, slug: str, name: str, cost_center: str = "", idp_group: str = "",
                parent: Team | None = None, source_ip: str | None = None) -> Team:
    team = Team(slug=slug, name=name, cost_center=cost_center, idp_group=idp_group, parent=parent)
    team.full_clean()
    team.save()
    TeamNamespace.objects.bulk_create(
        [TeamNamespace(team=team, cluster=c, next_attempt_at=_lease()) for c in Cluster.objects.filter(active=True)]
    )
    audit_record(actor=actor, action="team.create", obj=team, team=team, after=_snapshot(team, TEAM_FIELDS),
                 source_ip=source_ip)

    def enqueue():
        from .tasks import team_namespace_reconcile_task

        for pk in team.namespaces.values_list("pk", flat=True):
            team_namespace_reconcile_task.delay(pk)

    transaction.on_commit(enqueue)
    return team


@transaction.atomic
def team_update(*, actor, team: Team, name: str, cost_center: str, idp_group: str,
                parent: Team | None = None, source_ip: str | None = None) -> Team:
    team = Team.objects.select_for_update().get(pk=team.pk)
    before = _snapshot(team, TEAM_FIELDS)
    group_changed = team.idp_group != idp_group
    team.name, team.cost_center, team.idp_group, team.parent = name, cost_center, idp_group, parent
    team.full_clean()
    team.save()
    audit_record(actor=actor, action="team.update", obj=team, team=team, before=before,
                 after=_snapshot(team, TEAM_FIELDS), source_ip=source_ip)
    if group_changed:
        team_namespaces_touch(team_namespaces=team.namespaces.all())
    return team


ALLOWED_TRANSITIONS = {
    TeamState.ACTIVE: {TeamState.SUSPENDED, TeamState.ARCHIVED},
    TeamState.SUSPENDED: {TeamState.ACTIVE, TeamState.ARCHIVED},
    TeamState.ARCHIVED: {TeamState.ACTIVE},
}


@transaction.atomic
def team_set_state(*, actor, team: Team, state: str, source_ip: str | None = None) -> Team:
    team = Team.objects.select_for_update().get(pk=team.pk)
    if state not in ALLOWED_TRANSITIONS[team.state]:
        raise ValidationError(f"A {team.get_state_display().lower()} team cannot become {state}.")
    if team.namespace_deletion_confirmed_at:
        raise ValidationError("The team's namespaces have been deleted; it stays archived.")
    before = team.state
    team.state = state
    team.save(update_fields=["state"])
    audit_record(actor=actor, action=f"team.{state}", obj=team, team=team, before={"state": before},
                 after={"state": state}, source_ip=source_ip)
    team_namespaces_touch(team_namespaces=team.namespaces.all())
    return team


@transaction.atomic
def team_confirm_namespace_deletion(*, actor, team: Team, confirmation: str,
                                    source_ip: str | None = None) -> Team:
    """Deleting an archived team's namespaces destroys its workloads: only with the slug typed back."""
    team = Team.objects.select_for_update().get(pk=team.pk)
    if team.state != TeamState.ARCHIVED:
        raise ValidationError("Only an archived team's namespaces can be deleted.")
    if confirmation != team.slug:
        raise ValidationError({"confirmation": f"Type the team's slug ({team.slug}) to confirm."})
    team.namespace_deletion_confirmed_at = timezone.now()
    team.save(update_fields=["namespace_deletion_confirmed_at"])
    audit_record(actor=actor, action="team.namespaces_delete", obj=team, team=team, source_ip=source_ip)
    team_namespaces_touch(team_namespaces=team.namespaces.all())
    return team


# --- memberships ---------------------------------------------------------------------------------------------


def _require_member_admin(actor, team: Team) -> None:
    if not selectors.can_manage_members(user=actor, team=team):
        raise PermissionDenied("Only the team's admins can change its members.")


@transaction.atomic
def membership_set(*, actor, team: Team, user, role: str, source_ip: str | None = None) -> Membership:
    """Add a member or change a member's role."""
    _require_member_admin(actor, team)
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}."})
    membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
    before = {"role": membership.role} if membership else None
    if membership and membership.role == role:
        return membership
    if membership and membership.role == Role.ADMIN and role != Role.ADMIN:
        _keep_one_admin(team, leaving=membership)
    membership = membership or Membership(team=team, user=user)
    membership.role = role
    membership.full_clean()
    membership.save()
    audit_record(actor=actor, action="membership.set", obj=membership, team=team, before=before,
                 after={"user": user.username, "role": role}, source_ip=source_ip)
    team_namespaces_touch(team_namespaces=team.namespaces.all())
    return membership


def _keep_one_admin(team: Team, *, leaving: Membership) -> None:
    others = Membership.objects.filter(team=team, role=Role.ADMIN).exclude(pk=leaving.pk)
    if not others.exists():
        raise ValidationError("A team keeps at least one admin.")


@transaction.atomic
def membership_remove(*, actor, team: Team, user, source_ip: str | None = None) -> None:
    _require_member_admin(actor, team)
    membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
    if membership is None:
        return
    if membership.role == Role.ADMIN:
        _keep_one_admin(team, leaving=membership)
    audit_record(actor=actor, action="membership.remove", obj=membership, team=team,
                 before={"user": user.username, "role": membership.role}, source_ip=source_ip)
    membership.delete()
    team_namespaces_touch(team_namespaces=team.namespaces.all())



# --- single sign-on ------------------------------------------------------------------------------------------

ROLE_RANK = {Role.VIEWER: 1, Role.MEMBER: 2, Role.ADMIN: 3}


def idp_roles(*, groups: list[str]) -> dict[str, str]:
    """Team group → role from a user's identity-provider groups: `<g>` member, `<g><admin suffix>` team admin,
    `<g><viewer suffix>` viewer; the strongest wins when a user is in several of a team's groups."""
    suffixes = [(settings.OIDC_ADMIN_GROUP_SUFFIX, Role.ADMIN), (settings.OIDC_VIEWER_GROUP_SUFFIX, Role.VIEWER)]
    roles: dict[str, str] = {}
    for group in groups:
        candidates = [(group, Role.MEMBER)] + [(group.removesuffix(suffix), role) for suffix, role in suffixes
                                               if suffix and group.endswith(suffix) and group != suffix]
        for team_group, role in candidates:
            if ROLE_RANK[role] > ROLE_RANK.get(roles.get(team_group), 0):
                roles[team_group] = role
    return roles


def _clean_groups(groups) -> list[str]:
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ValidationError({"groups": "The identity provider's groups claim must be a list of strings."})
    return groups


@transaction.atomic
def membership_sync_from_idp(*, user, groups: list[str], source_ip: str | None = None) -> dict[str, list[str]]:
    """Make the memberships single sign-on manages match the user's identity-provider groups.

    Teams are matched on `Team.idp_group`. Only memberships marked as coming from the identity provider are
    changed or removed; a membership added in the portal is left as it is, and so is an archived team.
    The identity provider is the authority for its memberships, so the last-admin rule does not hold them back.
    """
    by_group = idp_roles(groups=_clean_groups(groups))
    teams = {t.pk: t for t in Team.objects.filter(idp_group__in=list(by_group)).exclude(state=TeamState.ARCHIVED)}
    wanted = {pk: by_group[team.idp_group] for pk, team in teams.items()}
    current = {m.team_id: m for m in Membership.objects.select_for_update().select_related("team")
               .filter(user=user).order_by("pk")}
    changed: dict[str, list[str]] = {"added": [], "updated": [], "removed": []}
    touched = []
    for team_id, membership in current.items():
        if membership.source != MembershipSource.IDP or team_id in wanted:
            continue
        audit_record(actor=user, action="membership.idp_remove", obj=membership, team=membership.team,
                     before={"user": user.username, "role": membership.role, "source": membership.source},
                     source_ip=source_ip)
        membership.delete()
        changed["removed"].append(membership.team.slug)
        touched.append(team_id)
    for team_id, role in sorted(wanted.items()):
        membership = current.get(team_id)
        if membership is not None and (membership.source != MembershipSource.IDP or membership.role == role):
            continue
        before = {"role": membership.role} if membership else None
        membership = membership or Membership(team=teams[team_id], user=user, source=MembershipSource.IDP)
        membership.role = role
        membership.full_clean()
        membership.save()
        audit_record(actor=user, action="membership.idp_set", obj=membership, team=membership.team, before=before,
                     after={"user": user.username, "role": role, "source": MembershipSource.IDP},
                     source_ip=source_ip)
        changed["updated" if before else "added"].append(teams[team_id].slug)
        touched.append(team_id)
    if touched:
        team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(team_id__in=touched))
    return changed


@transaction.atomic
def platform_admin_sync_from_idp(*, user, groups: list[str], source_ip: str | None = None) -> bool:
    """With a platform-admin group configured, its members are platform admins and nobody else signing in is."""
    group = settings.OIDC_PLATFORM_ADMIN_GROUP
    if not group:
        return user.is_staff
    admin = group in _clean_groups(groups)
    if user.is_staff != admin or user.is_superuser != admin:
        audit_record(actor=user, action="user.platform_admin_grant" if admin else "user.platform_admin_revoke",
                     obj=user, before={"is_staff": user.is_staff, "is_superuser": user.is_superuser},
                     after={"is_staff": admin, "is_superuser": admin}, source_ip=source_ip)
        user.is_staff = user.is_superuser = admin
        user.save(update_fields=["is_staff", "is_superuser"])
    return admin

# --- clusters, flavors, tiers --------------------------------------------------------------------------------

CLUSTER_FIELDS = ["name", "display_name", "connection", "server", "context", "scheduler", "prometheus_url",
                  "cohort", "overcommit", "active"]


@transaction.atomic
def cluster_create(*, actor, source_ip: str | None = None, **fields) -> Cluster:
    cluster = Cluster(**fields)
    cluster.full_clean()
    cluster.save()
    teams = Team.objects.exclude(state=TeamState.ARCHIVED)
    TeamNamespace.objects.bulk_create([TeamNamespace(team=t, cluster=cluster, next_attempt_at=_lease())
                                       for t in teams])
    audit_record(actor=actor, action="cluster.create", obj=cluster, after=_snapshot(cluster, CLUSTER_FIELDS),
                 source_ip=source_ip)
    clusters_touch(clusters=Cluster.objects.filter(pk=cluster.pk))
    team_namespaces_touch(team_namespaces=cluster.team_namespaces.all())
    return cluster


@transaction.atomic
def cluster_update(*, actor, cluster: Cluster, source_ip: str | None = None, **fields) -> Cluster:
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    before = _snapshot(cluster, CLUSTER_FIELDS)
    for name, value in fields.items():
        setattr(cluster, name, value)
    cluster.full_clean()
    cluster.save()
    audit_record(actor=actor, action="cluster.update", obj=cluster, before=before,
                 after=_snapshot(cluster, CLUSTER_FIELDS), source_ip=source_ip)
    clusters_touch(clusters=Cluster.objects.filter(pk=cluster.pk))
    team_namespaces_touch(team_namespaces=cluster.team_namespaces.all())
    return cluster


FLAVOR_FIELDS = ["cluster", "name", "resource_name", "gpu_model", "node_labels", "node_taints", "tolerations",
                 "capacity", "gpus_per_node", "memory_gb", "gpu_fraction", "sharing"]


@transaction.atomic
def gpu_flavor_save(*, actor, flavor: GpuFlavor, source_ip: str | None = None) -> GpuFlavor:
    before = _snapshot(GpuFlavor.objects.get(pk=flavor.pk), FLAVOR_FIELDS) if flavor.pk else None
    flavor.full_clean()
    flavor.save()
    audit_record(actor=actor, action="flavor.save", obj=flavor, before=before,
                 after=_snapshot(flavor, FLAVOR_FIELDS), source_ip=source_ip)
    clusters_touch(clusters=Cluster.objects.filter(pk=flavor.cluster_id))
    return flavor


@transaction.atomic
def priority_tier_save(*, actor, tier: PriorityTier, source_ip: str | None = None) -> PriorityTier:
    if tier.is_default:
        PriorityTier.objects.exclude(pk=tier.pk).filter(is_default=True).update(is_default=False)
    tier.full_clean()
    tier.save()
    audit_record(actor=actor, action="tier.save", obj=tier,
                 after=_snapshot(tier, ["name", "value", "preemption_policy", "is_default"]), source_ip=source_ip)
    clusters_touch(clusters=Cluster.objects.filter(active=True))
    return tier



@transaction.atomic
def admin_object_delete(*, actor, obj, source_ip: str | None = None) -> None:
    """A delete made in the Django admin: audited with the actor and what the row held, like every other change.

    Cluster-wide objects built from a flavor or a tier are re-reconciled; a deleted team's objects are pruned by
    the sweep (they carry the team label and no row wants them any more).
    """
    before = _snapshot(obj, [f.name for f in obj._meta.concrete_fields])
    team = obj.team if isinstance(obj, TeamNamespace) else None
    audit_record(actor=actor, action=f"{obj._meta.model_name}.delete", obj=obj, team=team, before=before,
                 source_ip=source_ip)
    affected = (Cluster.objects.filter(pk=obj.cluster_id) if isinstance(obj, GpuFlavor)
                else Cluster.objects.filter(active=True) if isinstance(obj, PriorityTier) else Cluster.objects.none())
    obj.delete()
    clusters_touch(clusters=affected)

# --- reconcile -----------------------------------------------------------------------------------------------


def _team_actual(client: kube.ClusterClient, row: TeamNamespace) -> list[dict]:
    selector = team_selector(row.team.slug)
    return client.list_all(
        (api_version, kind, row.team.namespace if kube.KINDS[(api_version, kind)].namespaced else None, selector)
        for api_version, kind in team_kinds(row.cluster)
    )


def team_namespace_reconcile(*, team_namespace_id: int, actual: list[dict] | None = None,
                             row: TeamNamespace | None = None) -> Outcome:
    """Make the cluster hold exactly what this team namespace wants. Safe to run any number of times."""
    if row is None:
        row = TeamNamespace.objects.select_related("team", "cluster").filter(pk=team_namespace_id).first()
        if row is None:
            return Outcome(statuses=[], writes=0)
    if not row.cluster.active:  # an inactive cluster is left alone: no reads, no writes, no pruning
        return Outcome(statuses=row.objects_status, writes=0)
    generation = row.generation
    desired = selectors.team_namespace_desired(team_namespace=row)
    client = kube.client_for_cluster(row.cluster)
    try:
        if actual is None:
            actual = _team_actual(client, row)
    except kube.KubeError as exc:
        return record(row, generation, Outcome(statuses=row.objects_status, writes=0, error=exc))
    _record_usage(row, actual)
    outcome = record(row, generation, converge(client, plan(desired, actual)))
    if outcome.error is None and not desired and row.deleted_at is None:
        TeamNamespace.objects.filter(pk=row.pk).update(deleted_at=timezone.now())
    return outcome


# Due rows of one cluster from which on their objects are read with one list per kind for the whole cluster (as the
# sweep does) rather than with one list per kind per row.
BULK_LIST_ROWS = 20


def team_namespaces_reconcile(*, cluster: Cluster, rows: list[TeamNamespace]) -> list[Outcome]:
    """Many team namespaces of one cluster at once, each exactly as `team_namespace_reconcile` would: their calls
    share the cluster's workers and their status is written in bulk (still only what changed)."""
    if not rows:
        return []
    if not cluster.active:
        return [Outcome(statuses=row.objects_status, writes=0) for row in rows]
    client = kube.client_for_cluster(cluster)
    generations = [row.generation for row in rows]
    try:
        if len(rows) >= BULK_LIST_ROWS:
            by_team = _managed_team_objects(client, cluster)
            actuals = [by_team.get(row.team.slug, []) for row in rows]
        else:
            actuals = [_team_actual(client, row) for row in rows]
    except kube.KubeError as exc:
        outcomes = [Outcome(statuses=row.objects_status, writes=0, error=exc) for row in rows]
        record_many(TeamNamespace, list(zip(rows, generations, outcomes, strict=True)))
        return outcomes
    flavors = list(cluster.flavors.order_by("name"))
    desired = [selectors.team_namespace_desired(team_namespace=row, memberships=row.team.memberships.all(),
                                                quotas=row.team.quotas.all(), flavors=flavors) for row in rows]
    for row, actual in zip(rows, actuals, strict=True):
        _record_usage(row, actual)
    outcomes = converge_many(client, [plan(want, actual) for want, actual in zip(desired, actuals, strict=True)])
    record_many(TeamNamespace, list(zip(rows, generations, outcomes, strict=True)))
    gone = [row.pk for row, want, outcome in zip(rows, desired, outcomes, strict=True)
            if outcome.error is None and not want and row.deleted_at is None]
    if gone:
        TeamNamespace.objects.filter(pk__in=gone).update(deleted_at=timezone.now())
    return outcomes


def _record_usage(row: TeamNamespace, actual: list[dict]) -> None:
    """GPU units in use, from the team ResourceQuota's status (the API server's quota controller keeps it)."""
    usage = {}
    for obj in actual:
        if obj["kind"] == "ResourceQuota":
            for key, value in ((obj.get("status") or {}).get("used") or {}).items():
                if key.startswith("requests.") and "/" in key:
                    usage[key.removeprefix("requests.")] = int(float(value))
    if usage != row.usage:
        row.usage = usage
        TeamNamespace.objects.filter(pk=row.pk).update(usage=usage)


def cluster_reconcile(*, cluster_id: int, actual: list[dict] | None = None) -> Outcome:
    cluster = Cluster.objects.filter(pk=cluster_id, active=True).first()
    if cluster is None:
        return Outcome(statuses=[], writes=0)
    generation = cluster.generation
    desired = selectors.cluster_desired(cluster=cluster)
    client = kube.client_for_cluster(cluster)
    try:
        if actual is None:
            actual = _cluster_actual(client, cluster)
    except kube.KubeError as exc:
        return record(cluster, generation, Outcome(statuses=cluster.objects_status, writes=0, error=exc))
    return record(cluster, generation, converge(client, plan(desired, actual)))


def reconcile_due(*, limit: int = 200) -> int:
    """Rows whose retry time (or nudge lease) has come: a change not yet applied, or a transient failure.

    Converged rows and permanently rejected ones have no next attempt, so they are not picked up here.
    """
    now = timezone.now()
    done = 0
    for cluster in Cluster.objects.filter(next_attempt_at__lte=now, active=True).order_by("next_attempt_at")[:limit]:
        cluster_reconcile(cluster_id=cluster.pk)
        done += 1
    due = (TeamNamespace.objects.filter(next_attempt_at__lte=now, cluster__active=True)
           .order_by("next_attempt_at").values_list("pk", "cluster_id")[:limit])
    by_cluster: dict[int, list[int]] = defaultdict(list)
    for pk, cluster_id in due:
        by_cluster[cluster_id].append(pk)
    for cluster in Cluster.objects.filter(pk__in=by_cluster):
        rows = list(selectors.team_namespaces_for_reconcile(cluster=cluster, pks=by_cluster[cluster.pk]))
        done += len(team_namespaces_reconcile(cluster=cluster, rows=rows))
    return done


def reconcile_sweep() -> dict:
    """Compare every cluster with the database in bulk; repair drift and prune what is no longer wanted.

    One list per kind per cluster, whatever the number of teams; a cluster that already matches gets no write.
    """
    totals = {"clusters": 0, "rows": 0, "repaired": 0, "writes": 0, "errors": 0}
    tiers = selectors.tier_specs()
    for cluster in Cluster.objects.filter(active=True):
        totals["clusters"] += 1
        client = kube.client_for_cluster(cluster)
        try:
            cluster_actual = _cluster_actual(client, cluster)
            by_team = _managed_team_objects(client, cluster)
        except kube.KubeError as exc:
            totals["errors"] += 1
            record(cluster, cluster.generation, Outcome(statuses=cluster.objects_status, writes=0, error=exc))
            continue
        if cluster.observed_generation < cluster.generation or not plan(
            selectors.cluster_desired(cluster=cluster, tiers=tiers), cluster_actual
        ).empty:
            outcome = cluster_reconcile(cluster_id=cluster.pk, actual=cluster_actual)
            totals["repaired"] += 1
            totals["writes"] += outcome.writes
        rows = selectors.team_namespaces_for_reconcile(cluster=cluster)
        flavors = list(cluster.flavors.order_by("name"))
        known = set()
        for row in rows:
            totals["rows"] += 1
            known.add(row.team.slug)
            actual = by_team.get(row.team.slug, [])
            _record_usage(row, actual)
            desired = selectors.team_namespace_desired(team_namespace=row, memberships=row.team.memberships.all(),
                                                       quotas=row.team.quotas.all(), flavors=flavors)
            if row.observed_generation >= row.generation and plan(desired, actual).empty:
                continue
            outcome = team_namespace_reconcile(team_namespace_id=row.pk, actual=actual, row=row)
            totals["repaired"] += 1
            totals["writes"] += outcome.writes
            totals["errors"] += outcome.error is not None
        totals["writes"] += _prune_orphans(client, {slug: objs for slug, objs in by_team.items() if slug not in known})
    return totals


def _cluster_actual(client: kube.ClusterClient, cluster: Cluster) -> list[dict]:
    return [obj for api_version, kind in cluster_kinds(cluster)
            for obj in client.list(api_version, kind, label_selector=cluster_scope_selector())]


def _managed_team_objects(client: kube.ClusterClient, cluster: Cluster) -> dict[str, list[dict]]:
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{TEAM_LABEL}"
    by_team: dict[str, list[dict]] = defaultdict(list)
    for api_version, kind in team_kinds(cluster):
        for obj in client.list(api_version, kind, label_selector=selector):
            by_team[obj["metadata"]["labels"][TEAM_LABEL]].append(obj)
    return by_team


def _prune_orphans(client: kube.ClusterClient, orphans: dict[str, list[dict]]) -> int:
    """Objects labelled for a team the database no longer has (e.g. removed by hand in the admin)."""
    writes = 0
    for slug, objects in orphans.items():
        outcome = converge(client, plan([], objects))
        writes += outcome.writes
        if outcome.error:
            log.warning("pruning objects of removed team %s failed: %s", slug, outcome.error)
    return writes


# --- personal access tokens ----------------------------------------------------------------------------------

MAX_TOKEN_DAYS = 366


@transaction.atomic
def access_token_create(*, actor, name: str, expires_in_days: int | None = None,
                        source_ip: str | None = None) -> tuple[AccessToken, str]:
    """A new token for the actor; returns the row and the token itself, which is shown once and never stored."""
    from .tokens import new_token, token_digest

    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_TOKEN_DAYS:
        raise ValidationError({"expires_in_days": f"Between 1 and {MAX_TOKEN_DAYS} days, or none for no expiry."})
    prefix, raw = new_token()
    now = timezone.now()
    token = AccessToken(user=actor, name=name.strip(), prefix=prefix, digest=token_digest(raw), created_at=now,
                        expires_at=now + timedelta(days=expires_in_days) if expires_in_days else None)
    token.full_clean()
    token.save()
    audit_record(actor=actor, action="token.create", obj=token,
                 after={"name": token.name, "prefix": prefix,
                        "expires_at": token.expires_at.isoformat() if token.expires_at else None},
                 source_ip=source_ip)
    return token, raw


@transaction.atomic
def access_token_revoke(*, actor, token: AccessToken, source_ip: str | None = None) -> AccessToken:
    token = AccessToken.objects.select_for_update().get(pk=token.pk)
    if token.user_id != actor.pk:
        raise PermissionDenied("Only the token's owner can revoke it.")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(actor=actor, action="token.revoke", obj=token, after={"prefix": token.prefix},
                     source_ip=source_ip)
    return token


TOKEN_TOUCH_SECONDS = 60


def access_token_touch(*, token: AccessToken) -> None:
    """Record use at most once a minute, so reading through the API does not write on every request."""
    now = timezone.now()
    if token.last_used_at and (now - token.last_used_at).total_seconds() < TOKEN_TOUCH_SECONDS:
        return
    AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
