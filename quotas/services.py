"""Writes for quotas: requests, decisions, time-boxed grants and their expiry.

Approval is atomic and capacity-checked: the flavor row is locked first, then the team's quota, then the
request (always in that order, so concurrent approvals queue instead of deadlocking), and Σ guaranteed of the
flavor may not exceed capacity × the cluster's overcommit. Reconcile is enqueued on commit.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal.errors import Conflict
from tenants.choices import Role, TeamState
from tenants.models import Cluster, GpuFlavor, Membership, Team, TeamNamespace
from tenants.selectors import is_platform_admin, team_role
from tenants.services import audit_record, notify_users, team_namespaces_touch

from . import capacity, selectors
from .choices import RequestState
from .models import MAX_UNITS, Quota, QuotaLevel, QuotaRequest

REQUEST_FIELDS = ["guaranteed", "burst", "cpu_cores", "memory_gib", "storage_gib"]


def _amounts(obj) -> dict:
    return {name: getattr(obj, name) for name in REQUEST_FIELDS}


def _record_level(quota: Quota) -> None:
    """The quota's new guaranteed and burst from now on: the history the evidence on requests reads."""
    QuotaLevel.objects.create(team_id=quota.team_id, flavor_id=quota.flavor_id, guaranteed=quota.guaranteed,
                              burst=quota.burst)


def _touch_cluster_of(team: Team, flavor: GpuFlavor) -> None:
    team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(team=team, cluster_id=flavor.cluster_id))


@transaction.atomic
def quota_request_create(*, actor, team: Team, flavor: GpuFlavor, guaranteed: int, burst: int, justification: str,
                         cpu_cores: int = 0, memory_gib: int = 0, storage_gib: int = 0, ends_at=None,
                         renewal_of: QuotaRequest | None = None, source_ip: str | None = None) -> QuotaRequest:
    if team_role(user=actor, team=team) not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Only the team's admins and members can request quota.")
    if team.state != TeamState.ACTIVE:
        raise Conflict(f"The team is {team.get_state_display().lower()}; it cannot request quota.")
    if not selectors.requestable_flavors(team=team).filter(pk=flavor.pk).exists():
        raise ValidationError({"flavor": "This flavor is not offered in a cluster where the team has a namespace."})
    waiting = selectors.pending_request_for(team=team, flavor=flavor)
    if waiting is not None:
        # One open question per flavor: a second would be decided against numbers the first one changes.
        raise ValidationError({"flavor": f"Request #{waiting.pk} for {flavor.name} in {flavor.cluster.name} is still "
                                         "pending: withdraw it, or wait for the platform team's decision, before "
                                         "asking again."})
    request = QuotaRequest(team=team, flavor=flavor, guaranteed=guaranteed, burst=burst, cpu_cores=cpu_cores,
                           memory_gib=memory_gib, storage_gib=storage_gib, justification=justification,
                           ends_at=ends_at, requested_by=actor, renewal_of=renewal_of)
    request.full_clean()
    _check_fits_flavor(flavor, guaranteed, burst)
    request.save()
    audit_record(actor=actor, action="quota_request.create", obj=request, team=team, after=_amounts(request),
                 source_ip=source_ip)
    return request


def _check_fits_flavor(flavor: GpuFlavor, guaranteed: int, burst: int) -> None:
    """A request that could never be granted is refused at once, with the numbers."""
    if guaranteed + burst > flavor.capacity * flavor.cluster.overcommit:
        raise ValidationError(
            f"{guaranteed} guaranteed + {burst} burst exceeds the whole {flavor.name} capacity "
            f"({flavor.capacity} units in {flavor.cluster.name})."
        )


@transaction.atomic
def quota_request_withdraw(*, actor, request: QuotaRequest, source_ip: str | None = None) -> QuotaRequest:
    request = QuotaRequest.objects.select_for_update(of=("self",)).select_related("team").get(pk=request.pk)
    # The role is read now, not when the request was made: a requester since demoted to viewer (or removed)
    # no longer acts for the team.
    role = team_role(user=actor, team=request.team)
    if not (role == Role.ADMIN or (role == Role.MEMBER and request.requested_by_id == actor.pk)):
        raise PermissionDenied("Only the requester, while a member of the team, or a team admin can withdraw "
                               "a request.")
    if request.state != RequestState.PENDING:
        raise Conflict(f"This request is already {request.get_state_display().lower()}.")
    request.state = RequestState.WITHDRAWN
    request.decided_at = timezone.now()
    request.save(update_fields=["state", "decided_at"])
    audit_record(actor=actor, action="quota_request.withdraw", obj=request, team=request.team, source_ip=source_ip)
    return request


def _lock_for_decision(request: QuotaRequest) -> tuple[GpuFlavor, QuotaRequest]:
    # Fixed lock order: flavor, then quotas of that flavor, then the request.
    (flavor,) = capacity.lock_flavors([request.flavor_id])
    list(Quota.objects.select_for_update().filter(flavor=flavor).order_by("pk").values_list("pk", flat=True))
    request = (QuotaRequest.objects.select_for_update(of=("self",)).select_related("team", "requested_by")
               .get(pk=request.pk))
    if request.state != RequestState.PENDING:
        raise Conflict(f"This request is already {request.get_state_display().lower()}.")
    return flavor, request


def _require_platform_admin(actor) -> None:
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins decide quota requests.")


@transaction.atomic
def quota_request_approve(*, actor, request: QuotaRequest, note: str = "", guaranteed: int | None = None,
                          burst: int | None = None, source_ip: str | None = None) -> Quota:
    """Grant the request (optionally adjusted). Refused, with nothing saved, if it would overcommit the flavor."""
    _require_platform_admin(actor)
    flavor, request = _lock_for_decision(request)
    granted_g = request.guaranteed if guaranteed is None else guaranteed
    granted_b = request.burst if burst is None else burst
    for name, value in (("guaranteed", granted_g), ("burst", granted_b)):
        if value < 0 or value > MAX_UNITS:
            raise ValidationError({name: f"Use a whole number between 0 and {MAX_UNITS}."})
    if request.team.state != TeamState.ACTIVE:
        raise Conflict(f"The team is {request.team.get_state_display().lower()}.")
    if request.ends_at and request.ends_at <= timezone.now():
        raise Conflict("The requested end date has passed; ask the team for a new request.")
    # Units of an active reservation stay on top of whatever total is granted while it lasts.
    reserved = capacity.reserved_active(team_id=request.team_id, flavor_id=flavor.pk)
    effect = selectors.impact(flavor=flavor, team=request.team, guaranteed=granted_g + reserved, burst=granted_b)
    if not effect.fits:
        raise Conflict(
            f"Approving would guarantee {effect.guaranteed_after} {flavor.name} units, more than the "
            f"{effect.allowed} allowed (capacity {flavor.capacity} × overcommit {effect.overcommit:g}). "
            f"At most {effect.allowed - effect.guaranteed_before + effect.current[0]} can be guaranteed to this team."
        )
    quota = Quota.objects.filter(team=request.team, flavor=flavor).first() or Quota(team=request.team, flavor=flavor)
    before = _amounts(quota) if quota.pk else None
    if request.ends_at:
        if quota.expires_at is None:  # keep what an earlier, still running time box reverts to
            quota.revert_guaranteed, quota.revert_burst = quota.guaranteed, quota.burst
            quota.revert_cpu_cores, quota.revert_memory_gib = quota.cpu_cores, quota.memory_gib
            quota.revert_storage_gib = quota.storage_gib
        quota.expires_at, quota.expiry_notice_sent_at = request.ends_at, None
    else:
        quota.expires_at = None
    quota.guaranteed, quota.burst = granted_g + reserved, granted_b
    quota.cpu_cores, quota.memory_gib, quota.storage_gib = request.cpu_cores, request.memory_gib, request.storage_gib
    capacity.check_future(flavor=flavor, team=request.team, guaranteed=quota.guaranteed, expires_at=quota.expires_at,
                          revert_guaranteed=quota.revert_guaranteed, now=timezone.now())
    quota.full_clean()
    quota.save()
    _record_level(quota)
    request.state, request.decided_by, request.decided_at = RequestState.APPROVED, actor, timezone.now()
    request.decision_note, request.granted_guaranteed, request.granted_burst = note, granted_g, granted_b
    request.save()
    audit_record(actor=actor, action="quota_request.approve", obj=request, team=request.team, before=before,
                 after=_amounts(quota), source_ip=source_ip)
    _touch_cluster_of(request.team, flavor)
    adjusted = (granted_g, granted_b) != (request.guaranteed, request.burst)
    notify_users(
        users=[request.requested_by],
        subject=f"Quota approved: {granted_g}+{granted_b} {flavor.name} for {request.team.slug}",
        body=(f"Your request #{request.pk} was approved{' with adjusted amounts' if adjusted else ''}: "
              f"{granted_g} guaranteed and {granted_b} burst {flavor.name} in {flavor.cluster.name}"
              + (f" until {request.ends_at:%Y-%m-%d %H:%M} UTC" if request.ends_at else "") + f".\n{note}"),
    )
    return quota


@transaction.atomic
def quota_request_reject(*, actor, request: QuotaRequest, note: str, source_ip: str | None = None) -> QuotaRequest:
    _require_platform_admin(actor)
    if not note.strip():
        raise ValidationError({"note": "Say why the request is rejected."})
    _, request = _lock_for_decision(request)
    request.state, request.decided_by, request.decided_at = RequestState.REJECTED, actor, timezone.now()
    request.decision_note = note
    request.save()
    audit_record(actor=actor, action="quota_request.reject", obj=request, team=request.team, source_ip=source_ip)
    notify_users(users=[request.requested_by], subject=f"Quota request #{request.pk} rejected",
                 body=f"Your request for {request.flavor.name} ({request.team.slug}) was rejected:\n{note}")
    return request


@transaction.atomic
def quota_set(*, actor, team: Team, flavor: GpuFlavor, guaranteed: int, burst: int, cpu_cores: int = 0,
              memory_gib: int = 0, storage_gib: int = 0, source_ip: str | None = None) -> Quota:
    """A platform admin sets a quota directly (seeding, corrections); the same capacity rule applies."""
    _require_platform_admin(actor)
    (flavor,) = capacity.lock_flavors([flavor.pk])
    guaranteed += capacity.reserved_active(team_id=team.pk, flavor_id=flavor.pk)
    effect = selectors.impact(flavor=flavor, team=team, guaranteed=guaranteed, burst=burst)
    if not effect.fits:
        raise ValidationError(f"{effect.guaranteed_after} guaranteed exceeds the {effect.allowed} allowed.")
    quota = (Quota.objects.select_for_update().filter(team=team, flavor=flavor).first()
             or Quota(team=team, flavor=flavor))
    capacity.check_future(flavor=flavor, team=team, guaranteed=guaranteed, expires_at=quota.expires_at,
                          revert_guaranteed=quota.revert_guaranteed, now=timezone.now())
    before = _amounts(quota) if quota.pk else None
    quota.guaranteed, quota.burst = guaranteed, burst
    quota.cpu_cores, quota.memory_gib, quota.storage_gib = cpu_cores, memory_gib, storage_gib
    quota.full_clean()
    quota.save()
    _record_level(quota)
    audit_record(actor=actor, action="quota.set", obj=quota, team=team, before=before, after=_amounts(quota),
                 source_ip=source_ip)
    _touch_cluster_of(team, flavor)
    return quota


def quota_expire_due() -> int:
    """Revert time-boxed grants whose end has come, and warn teams whose grant ends soon."""
    now = timezone.now()
    reverted = 0
    for quota in selectors.expiring_quotas(before=now):
        with transaction.atomic():
            if _quota_revert(quota_id=quota.pk, now=now):
                reverted += 1
    notice = timedelta(days=settings.QUOTA_EXPIRY_NOTICE_DAYS)
    for quota in selectors.expiry_notices_due(now=now, notice=notice):
        with transaction.atomic():
            if Quota.objects.filter(pk=quota.pk, expiry_notice_sent_at__isnull=True).update(expiry_notice_sent_at=now):
                notify_users(
                    users=_team_admins(quota.team),
                    subject=f"{quota.flavor.name} grant of {quota.team.slug} ends {quota.expires_at:%Y-%m-%d}",
                    body=(f"{quota.guaranteed}+{quota.burst} {quota.flavor.name} reverts to "
                          f"{quota.revert_guaranteed}+{quota.revert_burst} on {quota.expires_at:%Y-%m-%d %H:%M} UTC. "
                          "Ask to renew from the team's quota page."),
                )
    return reverted


def _quota_revert(*, quota_id: int, now) -> bool:
    """The whole previous grant comes back (GPUs, CPU, memory, storage), as far as the flavor's capacity allows:
    the flavor is locked first, as every capacity-changing write does."""
    quota = Quota.objects.select_related("flavor").filter(pk=quota_id).first()
    if quota is None:
        return False
    capacity.lock_flavors([quota.flavor_id])
    locked = (Quota.objects.select_for_update(of=("self",)).select_related("team", "flavor__cluster")
              .filter(pk=quota_id, expires_at__lte=now).first())
    if locked is None:
        return False
    before = _amounts(locked)
    wanted = locked.revert_guaranteed
    restored = capacity.units_after_revert(quota=locked, guaranteed=wanted)
    locked.guaranteed, locked.burst = restored, locked.revert_burst
    for name in ("cpu_cores", "memory_gib", "storage_gib"):
        previous = getattr(locked, f"revert_{name}")
        if previous is not None:
            setattr(locked, name, previous)
    locked.expires_at = locked.expiry_notice_sent_at = None
    locked.revert_cpu_cores = locked.revert_memory_gib = locked.revert_storage_gib = None
    locked.save()
    _record_level(locked)
    flavor = locked.flavor
    short = ""
    if restored < wanted:
        short = (f" Only {restored} of the {wanted} guaranteed units came back: the rest would over-commit "
                 f"{flavor.name} (capacity {flavor.capacity} × overcommit {flavor.cluster.overcommit:g}). "
                 "Ask for them again from the team's quota page.")
    audit_record(actor=None, action="quota.expire", obj=locked, team=locked.team, before=before,
                 after={**_amounts(locked), **({"not_restored": wanted - restored} if short else {})})
    _touch_cluster_of(locked.team, flavor)
    notify_users(users=_team_admins(locked.team), subject=f"Time-boxed {flavor.name} grant ended",
                 body=f"{locked.team.slug} now holds {locked.guaranteed}+{locked.burst} {flavor.name}.{short}")
    return True


def _team_admins(team: Team):
    return [m.user for m in Membership.objects.filter(team=team, role=Role.ADMIN).select_related("user")]


def cluster_flavors_remaking(*, cluster, names: list[str]) -> None:
    """Record the flavors its scheduler must make again (`backends.kueue`) on the cluster, and nudge every team
    namespace of it to leave them out of its queue, then to list them again once they are back."""
    if names == list(cluster.replacing_flavors):
        return
    with transaction.atomic():
        Cluster.objects.filter(pk=cluster.pk).update(replacing_flavors=names)
        team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(cluster=cluster, deleted_at__isnull=True))
    cluster.replacing_flavors = names
