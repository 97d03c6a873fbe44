"""Every write to tenancy data: teams and memberships here, the rest in modules named for their purpose (audit,
mail, nudges, sso, clusters, tokens), re-exported below so that this module stays the one entry point for writes.

Writes validate, save, audit and bump the generation of what the cluster must change, inside one transaction;
the reconcile nudge is sent on commit (composition/ does the reconcile itself).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal import desired
from portal.errors import Conflict

from . import selectors
from .audit import audit_record, snapshot
from .checks import capacity_checks_run
from .choices import Role, TeamState
from .clusters import (  # noqa: F401 - re-exported: services is the entry point for writes
    CLUSTER_FIELDS,
    FLAVOR_FIELDS,
    admin_object_delete,
    cluster_create,
    cluster_update,
    gpu_flavor_save,
    priority_tier_save,
)
from .mail import notify_users  # noqa: F401
from .models import Cluster, Membership, Team, TeamNamespace
from .nudges import clusters_touch, lease, reconcile_retry, team_namespaces_touch  # noqa: F401
from .sso import ROLE_RANK, idp_roles, membership_sync_from_idp, platform_admin_sync_from_idp  # noqa: F401
from .tokens import (  # noqa: F401
    MAX_TOKEN_DAYS,
    TOKEN_TOUCH_SECONDS,
    access_token_create,
    access_token_revoke,
    access_token_touch,
)

TEAM_FIELDS = ["slug", "name", "cost_center", "idp_group", "parent", "state"]


@transaction.atomic
def team_create(*, actor, slug: str, name: str, cost_center: str = "", idp_group: str = "",
                parent: Team | None = None, source_ip: str | None = None) -> Team:
    team = Team(slug=slug, name=name, cost_center=cost_center, idp_group=idp_group, parent=parent)
    team.full_clean()
    team.save()
    TeamNamespace.objects.bulk_create(
        [TeamNamespace(team=team, cluster=c, next_attempt_at=lease()) for c in Cluster.objects.filter(active=True)]
    )
    audit_record(actor=actor, action="team.create", obj=team, team=team, after=snapshot(team, TEAM_FIELDS),
                 source_ip=source_ip)

    ids = list(team.namespaces.values_list("pk", flat=True))
    transaction.on_commit(lambda: desired.reconciler().team_namespaces(ids))
    return team


@transaction.atomic
def team_update(*, actor, team: Team, name: str, cost_center: str, idp_group: str,
                parent: Team | None = None, source_ip: str | None = None) -> Team:
    team = Team.objects.select_for_update().get(pk=team.pk)
    before = snapshot(team, TEAM_FIELDS)
    group_changed = team.idp_group != idp_group
    team.name, team.cost_center, team.idp_group, team.parent = name, cost_center, idp_group, parent
    team.full_clean()
    team.save()
    audit_record(actor=actor, action="team.update", obj=team, team=team, before=before,
                 after=snapshot(team, TEAM_FIELDS), source_ip=source_ip)
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
    if state == TeamState.ACTIVE:
        capacity_checks_run("resume", team=team)
    team.state = state
    team.save(update_fields=["state"])
    audit_record(actor=actor, action=f"team.{state}", obj=team, team=team, before={"state": before},
                 after={"state": state}, source_ip=source_ip)
    team_namespaces_touch(team_namespaces=team.namespaces.all())
    return team


@transaction.atomic
def team_set_fair_share_weight(*, actor, team: Team, weight: int, source_ip: str | None = None) -> Team:
    """A platform admin's weight for the team among the teams sharing a cohort (Kueue) or parent queue (Volcano).
    Its queues change; a department's weight is on its Cohort / parent queue, a cluster object."""
    team = Team.objects.select_for_update().get(pk=team.pk)
    before = team.fair_share_weight
    team.fair_share_weight = weight
    team.full_clean(validate_unique=False, validate_constraints=False)
    team.save(update_fields=["fair_share_weight"])
    audit_record(actor=actor, action="team.fair_share_weight", obj=team, team=team,
                 before={"fair_share_weight": before}, after={"fair_share_weight": weight}, source_ip=source_ip)
    team_namespaces_touch(team_namespaces=team.namespaces.all())
    if team.children.exists():
        clusters_touch(clusters=Cluster.objects.filter(team_namespaces__team=team).distinct())
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
        raise Conflict("A team keeps at least one admin.")


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
