"""Writes for advance reservations (the reservation half of quotas/services.py, kept apart for size): a team books
units of a flavor for a future window, a platform admin decides, the worker raises the team's guaranteed quota at
the start and lowers it at the end.

Deciding takes the locks of every capacity-changing write, in the same order (the flavor, then its quotas, then
the row decided), and checks Σ guaranteed at every instant of the window against every grant, time-boxed grant and
reservation (quotas/capacity.py). Starting and ending change the Quota row and touch the team's namespace, exactly
as a grant does, so the cluster follows through the same desired state with nothing scheduler-specific here.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal.errors import Conflict
from tenants.choices import Role, TeamState
from tenants.models import GpuFlavor, Team
from tenants.selectors import is_platform_admin, team_role
from tenants.services import audit_record, notify_users

from . import capacity, selectors
from .choices import ReservationState
from .models import Quota, Reservation
from .services import _record_level, _team_admins, _touch_cluster_of

OPEN = (ReservationState.PENDING, ReservationState.BOOKED)


def _window(reservation: Reservation) -> str:
    return f"{reservation.starts_at:%Y-%m-%d %H:%M}–{reservation.ends_at:%Y-%m-%d %H:%M} UTC"


@transaction.atomic
def reservation_create(*, actor, team: Team, flavor: GpuFlavor, units: int, starts_at, ends_at, justification: str,
                       source_ip: str | None = None) -> Reservation:
    if team_role(user=actor, team=team) not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Only the team's admins and members can book capacity.")
    if team.state != TeamState.ACTIVE:
        raise Conflict(f"The team is {team.get_state_display().lower()}; it cannot book capacity.")
    if not selectors.requestable_flavors(team=team).filter(pk=flavor.pk).exists():
        raise ValidationError({"flavor": "This flavor is not offered in a cluster where the team has a namespace."})
    if starts_at <= timezone.now():
        raise ValidationError({"starts_at": "A reservation starts in the future."})
    reservation = Reservation(team=team, flavor=flavor, units=units, starts_at=starts_at, ends_at=ends_at,
                              justification=justification, requested_by=actor)
    reservation.full_clean()
    allowed = capacity.allowed_units(flavor.capacity, flavor.cluster.overcommit)
    if units > allowed:
        raise ValidationError({"units": f"{units} units exceed the whole {flavor.name} capacity ({allowed} allowed)."})
    reservation.save()
    audit_record(actor=actor, action="reservation.create", obj=reservation, team=team,
                 after={"units": units, "starts_at": starts_at.isoformat(), "ends_at": ends_at.isoformat()},
                 source_ip=source_ip)
    return reservation


def _lock(reservation: Reservation) -> Reservation:
    (flavor,) = capacity.lock_flavors([reservation.flavor_id])
    list(Quota.objects.select_for_update().filter(flavor=flavor).order_by("pk").values_list("pk", flat=True))
    locked = (Reservation.objects.select_for_update(of=("self",)).select_related("team", "requested_by")
              .get(pk=reservation.pk))
    locked.flavor = flavor
    return locked


@transaction.atomic
def reservation_approve(*, actor, reservation: Reservation, note: str = "",
                        source_ip: str | None = None) -> Reservation:
    """Book it: refused, with the first instant that would over-commit, unless it fits all through its window."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins decide reservations.")
    reservation = _lock(reservation)
    if reservation.state != ReservationState.PENDING:
        raise Conflict(f"This reservation is already {reservation.get_state_display().lower()}.")
    now = timezone.now()
    if reservation.starts_at <= now:
        raise Conflict("The reservation's start has passed; ask the team for a new one.")
    if reservation.team.state != TeamState.ACTIVE:
        raise Conflict(f"The team is {reservation.team.get_state_display().lower()}.")
    capacity.check_reservation(flavor=reservation.flavor, units=reservation.units, starts_at=reservation.starts_at,
                               ends_at=reservation.ends_at, now=now)
    reservation.state, reservation.decided_by, reservation.decided_at = ReservationState.BOOKED, actor, now
    reservation.decision_note = note
    reservation.save(update_fields=["state", "decided_by", "decided_at", "decision_note"])
    audit_record(actor=actor, action="reservation.approve", obj=reservation, team=reservation.team,
                 source_ip=source_ip)
    notify_users(users=[reservation.requested_by],
                 subject=(f"Reservation booked: {reservation.units} {reservation.flavor.name} for "
                          f"{reservation.team.slug}"),
                 body=f"Reservation #{reservation.pk} is booked for {_window(reservation)}.\n{note}")
    return reservation


@transaction.atomic
def reservation_reject(*, actor, reservation: Reservation, note: str, source_ip: str | None = None) -> Reservation:
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins decide reservations.")
    if not note.strip():
        raise ValidationError({"note": "Say why the reservation is rejected."})
    reservation = _lock(reservation)
    if reservation.state != ReservationState.PENDING:
        raise Conflict(f"This reservation is already {reservation.get_state_display().lower()}.")
    reservation.state, reservation.decided_by, reservation.decided_at = ReservationState.REJECTED, actor, timezone.now()
    reservation.decision_note = note
    reservation.save(update_fields=["state", "decided_by", "decided_at", "decision_note"])
    audit_record(actor=actor, action="reservation.reject", obj=reservation, team=reservation.team,
                 source_ip=source_ip)
    notify_users(users=[reservation.requested_by], subject=f"Reservation #{reservation.pk} rejected",
                 body=f"Your reservation of {reservation.flavor.name} ({reservation.team.slug}) was rejected:\n{note}")
    return reservation


@transaction.atomic
def reservation_cancel(*, actor, reservation: Reservation, source_ip: str | None = None) -> Reservation:
    """Pending or booked, before it starts: its requester (still a member), a team admin or a platform admin."""
    reservation = _lock(reservation)
    role = team_role(user=actor, team=reservation.team)
    if not (role == Role.ADMIN or (role == Role.MEMBER and reservation.requested_by_id == actor.pk)):
        raise PermissionDenied("Only the requester, while a member of the team, or a team admin can cancel it.")
    if reservation.state not in OPEN:
        raise Conflict(f"This reservation is {reservation.get_state_display().lower()}; it can no longer be "
                       "cancelled.")
    if reservation.starts_at <= timezone.now():
        raise Conflict("The reservation has started; it can no longer be cancelled.")
    reservation.state = ReservationState.CANCELLED
    reservation.save(update_fields=["state"])
    audit_record(actor=actor, action="reservation.cancel", obj=reservation, team=reservation.team,
                 source_ip=source_ip)
    return reservation


def reservation_apply_due(*, now=None) -> dict:
    """Start the booked reservations whose start has come and end the active ones whose end has come, each in its
    own transaction under the flavor lock, and warn the team before an active one ends, with the same notice as a
    time-boxed grant (run by beat every minute)."""
    now = now or timezone.now()
    done = {"started": 0, "ended": 0, "warned": 0}
    due = Reservation.objects.filter(state=ReservationState.BOOKED, starts_at__lte=now).values_list("pk", flat=True)
    for pk in list(due):
        with transaction.atomic():
            done["started"] += _start(pk, now)
    due = Reservation.objects.filter(state=ReservationState.ACTIVE, ends_at__lte=now).values_list("pk", flat=True)
    for pk in list(due):
        with transaction.atomic():
            done["ended"] += _end(pk, now)
    notice = timedelta(days=settings.QUOTA_EXPIRY_NOTICE_DAYS)
    for reservation in selectors.reservation_end_notices_due(now=now, notice=notice):
        with transaction.atomic():
            # The conditional update makes the notice go once, whichever worker gets there first.
            if Reservation.objects.filter(pk=reservation.pk, end_notice_sent_at__isnull=True).update(
                    end_notice_sent_at=now):
                notify_users(users=_team_admins(reservation.team),
                             subject=(f"Reservation of {reservation.units} {reservation.flavor.name} ends "
                                      f"{reservation.ends_at:%Y-%m-%d}"),
                             body=(f"{reservation.team.slug}'s booking #{reservation.pk} ({_window(reservation)}) ends "
                                   f"on {reservation.ends_at:%Y-%m-%d %H:%M} UTC; its {reservation.units} guaranteed "
                                   f"{reservation.flavor.name} go then. Book again from the team's quota page."))
                done["warned"] += 1
    return done


def _quota_of(reservation: Reservation) -> Quota:
    return (Quota.objects.select_for_update(of=("self",)).filter(team=reservation.team, flavor=reservation.flavor)
            .first() or Quota(team=reservation.team, flavor=reservation.flavor))


def _start(pk: int, now) -> int:
    reservation = _lock(Reservation(pk=pk, flavor_id=Reservation.objects.get(pk=pk).flavor_id))
    if reservation.state != ReservationState.BOOKED or reservation.starts_at > now:
        return 0
    if reservation.ends_at <= now:  # the worker was down for the whole window: nothing to hold any more
        reservation.state = ReservationState.ENDED
        reservation.save(update_fields=["state"])
        return 0
    quota = _shift(reservation, +reservation.units, ReservationState.ACTIVE, "start")
    _notify_shift(reservation, "started",
                  f"{reservation.team.slug} now holds {quota.guaranteed}+{quota.burst} {reservation.flavor.name} "
                  f"until {reservation.ends_at:%Y-%m-%d %H:%M} UTC.")
    return 1


def _end(pk: int, now) -> int:
    reservation = _lock(Reservation(pk=pk, flavor_id=Reservation.objects.get(pk=pk).flavor_id))
    if reservation.state != ReservationState.ACTIVE or reservation.ends_at > now:
        return 0
    quota = _shift(reservation, -reservation.units, ReservationState.ENDED, "end")
    _notify_shift(reservation, "ended",
                  f"{reservation.team.slug} now holds {quota.guaranteed}+{quota.burst} {reservation.flavor.name}.")
    return 1


def _shift(reservation: Reservation, units: int, state: str, action: str) -> Quota:
    """Move the team's guaranteed units by the booking (a time box running beside it reverts to what it held, plus
    or minus the booking), record the level, the state and the audit event, and touch the team's namespace."""
    quota = _quota_of(reservation)
    before = {"guaranteed": quota.guaranteed, "burst": quota.burst} if quota.pk else None
    quota.guaranteed = max(0, quota.guaranteed + units)
    if quota.expires_at is not None:
        quota.revert_guaranteed = max(0, quota.revert_guaranteed + units)
    quota.save()
    _record_level(quota)
    reservation.state = state
    reservation.save(update_fields=["state"])
    audit_record(actor=None, action=f"reservation.{action}", obj=reservation, team=reservation.team, before=before,
                 after={"guaranteed": quota.guaranteed, "burst": quota.burst})
    _touch_cluster_of(reservation.team, reservation.flavor)
    return quota


def _notify_shift(reservation: Reservation, verb: str, body: str) -> None:
    notify_users(users=_team_admins(reservation.team),
                 subject=f"Reservation of {reservation.units} {reservation.flavor.name} {verb}", body=body)
