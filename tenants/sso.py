"""Single sign-on: memberships and the platform-admin role follow the identity provider's groups."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from .audit import audit_record
from .choices import MembershipSource, Role, TeamState
from .models import Membership, Team, TeamNamespace
from .nudges import team_namespaces_touch

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
