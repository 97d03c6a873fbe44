"""Writes to what billing prices and watches: rate cards, budgets and their alerts. Each validates, saves and
audits inside one transaction; mail goes out on commit."""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from tenants.choices import Role
from tenants.models import GpuFlavor, Membership, Team
from tenants.selectors import is_platform_admin, team_role
from tenants.services import audit_record, notify_users

from . import enforce, selectors
from .choices import BudgetMode
from .models import Allowance, Budget, BudgetAlert, BudgetOverride, RateCard

logger = logging.getLogger(__name__)



def _decimal(value, name: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise ValidationError({name: f"'{value}' is not a number."}) from None
    if not number.is_finite():
        raise ValidationError({name: "Use a finite number."})
    return number


@transaction.atomic
def rate_card_set(*, actor, flavor: GpuFlavor, price, effective_from: datetime, note: str = "",
                  source_ip: str | None = None) -> RateCard:
    """A new price from `effective_from` on. The open period before it is closed there; history is kept, so a
    period that already ended, or one that starts later, is never rewritten: a change that would overlap it is
    refused."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins set rate cards.")
    price = _decimal(price, "price_per_gpu_hour")
    if price < 0:
        raise ValidationError({"price_per_gpu_hour": "A price cannot be negative."})
    if timezone.is_naive(effective_from):
        raise ValidationError({"effective_from": "Give the time with its time zone (UTC)."})
    if effective_from != selectors.floor_hour(effective_from):
        raise ValidationError({"effective_from": "Rates change on the hour (usage is priced per hour)."})
    # Rate changes of one flavor queue up behind each other instead of racing to close the same period.
    GpuFlavor.objects.select_for_update().get(pk=flavor.pk)
    cards = RateCard.objects.filter(flavor=flavor)
    covering = cards.filter(effective_from__lt=effective_from).filter(
        Q(effective_to__isnull=True) | Q(effective_to__gt=effective_from)).first()
    if covering is not None and covering.effective_to is not None:
        raise ValidationError({"effective_from": (
            f"The rate from {covering.effective_from:%Y-%m-%d %H:%M} to {covering.effective_to:%Y-%m-%d %H:%M} UTC "
            "covers this time; a new rate may start only where no closed period runs.")})
    later = cards.filter(effective_from__gte=effective_from).order_by("effective_from").first()
    if later is not None:
        raise ValidationError({"effective_from": (
            f"A rate of {later.price_per_gpu_hour} {later.currency} already starts "
            f"{later.effective_from:%Y-%m-%d %H:%M} UTC; rates are history and are not rewritten. "
            "Choose a later start.")})
    if covering is not None:
        before = {"effective_to": None}
        covering.effective_to = effective_from
        covering.full_clean()
        covering.save(update_fields=["effective_to"])
        audit_record(actor=actor, action="rate_card.close", obj=covering, before=before,
                     after={"effective_to": effective_from.isoformat()}, source_ip=source_ip)
    card = RateCard(flavor=flavor, price_per_gpu_hour=price, currency=settings.BILLING_CURRENCY,
                    effective_from=effective_from, note=note)
    card.full_clean()
    card.save()
    audit_record(actor=actor, action="rate_card.set", obj=card,
                 after={"flavor": flavor.name, "price_per_gpu_hour": str(price), "currency": card.currency,
                        "effective_from": effective_from.isoformat()}, source_ip=source_ip)
    return card


def can_set_budget(*, user, team: Team) -> bool:
    return team_role(user=user, team=team) == Role.ADMIN


@transaction.atomic
def budget_set(*, actor, team: Team, month: date, amount, mode: str | None = None,
               source_ip: str | None = None) -> Budget:
    """Set (or change) a team's budget for a month; team admins and platform admins only. Changing the amount
    forgets the alerts of thresholds the new amount is no longer past, so they can fire again. `mode` (notify, or
    hold new work when spent) is kept as it was when not given."""
    if not can_set_budget(user=actor, team=team):
        raise PermissionDenied("Only the team's admins and platform admins set its budget.")
    if mode is not None and mode not in BudgetMode.values:
        raise ValidationError({"mode": f"Choose one of: {', '.join(BudgetMode.values)}."})
    amount = _decimal(amount, "amount")
    if amount <= 0:
        raise ValidationError({"amount": "A budget must be more than zero."})
    if month.day != 1:
        raise ValidationError({"month": "A budget is for a whole month."})
    if month < selectors.current_month():
        raise ValidationError({"month": "That month is over; its budget can no longer change."})
    budget = Budget.objects.select_for_update().filter(team=team, month=month).first()
    before = {"amount": str(budget.amount), "mode": budget.mode} if budget else None
    budget = budget or Budget(team=team, month=month, currency=settings.BILLING_CURRENCY)
    budget.amount = amount
    budget.mode = mode or budget.mode
    budget.full_clean()
    budget.save()
    statement = selectors.team_statement(team=team, month=month)
    budget.alerts.filter(threshold__gt=_thresholds_crossed(statement.total_cost, amount)).delete()
    audit_record(actor=actor, action="budget.set", obj=budget, team=team, before=before,
                 after={"amount": str(amount), "month": month.isoformat(), "mode": budget.mode}, source_ip=source_ip)
    enforce.enforcement_changed(team=team)
    return budget


# --- allowances and overrides: platform admins only -----------------------------------------------------------


def _require_platform_admin(actor, what: str) -> None:
    if not is_platform_admin(actor):
        raise PermissionDenied(f"Only platform admins {what}.")


@transaction.atomic
def allowance_set(*, actor, team: Team, flavor: GpuFlavor, gpu_hours, window_days: int,
                  source_ip: str | None = None) -> Allowance:
    """Set (or change) how many GPU-hours of a flavor the team may use over a rolling window of days."""
    _require_platform_admin(actor, "set GPU-hour allowances")
    gpu_hours = _decimal(gpu_hours, "gpu_hours")
    if gpu_hours <= 0:
        raise ValidationError({"gpu_hours": "An allowance must be more than zero GPU-hours."})
    try:
        window_days = int(window_days)
    except (TypeError, ValueError):
        raise ValidationError({"window_days": f"'{window_days}' is not a whole number of days."}) from None
    if not 1 <= window_days <= 366:
        raise ValidationError({"window_days": "The window is 1 to 366 days (7 for a week, 30 for a month)."})
    allowance = Allowance.objects.select_for_update().filter(team=team, flavor=flavor).first()
    before = {"gpu_hours": str(allowance.gpu_hours), "window_days": allowance.window_days} if allowance else None
    allowance = allowance or Allowance(team=team, flavor=flavor)
    allowance.gpu_hours, allowance.window_days = gpu_hours, window_days
    allowance.full_clean()
    allowance.save()
    audit_record(actor=actor, action="allowance.set", obj=allowance, team=team, before=before,
                 after={"flavor": flavor.name, "gpu_hours": str(gpu_hours), "window_days": window_days},
                 source_ip=source_ip)
    enforce.enforcement_changed(team=team)
    return allowance


@transaction.atomic
def allowance_delete(*, actor, allowance: Allowance, source_ip: str | None = None) -> None:
    _require_platform_admin(actor, "remove GPU-hour allowances")
    team = allowance.team
    audit_record(actor=actor, action="allowance.delete", obj=allowance, team=team,
                 before={"flavor": allowance.flavor.name, "gpu_hours": str(allowance.gpu_hours),
                         "window_days": allowance.window_days}, source_ip=source_ip)
    allowance.delete()
    enforce.enforcement_changed(team=team)


@transaction.atomic
def budget_override_grant(*, actor, team: Team, reason: str, expires_at: datetime, flavor: GpuFlavor | None = None,
                          extra_gpu_hours=None, extra_amount=None, source_ip: str | None = None) -> BudgetOverride:
    """A one-off exception until `expires_at`: extra GPU-hours on a flavor's allowance, extra money on the monthly
    budget, or (neither given) every hold of the team lifted."""
    _require_platform_admin(actor, "grant budget overrides")
    now = timezone.now()
    errors = {}
    if not (reason or "").strip():
        errors["reason"] = "Say why (it is kept in the audit log)."
    if timezone.is_naive(expires_at):
        errors["expires_at"] = "Give the time with its time zone (UTC)."
    elif expires_at <= now:
        errors["expires_at"] = "The override must end in the future."
    if extra_gpu_hours not in (None, "") and extra_amount not in (None, ""):
        errors["extra_amount"] = "Grant GPU-hours or money, not both (two overrides if both are meant)."
    hours = _decimal(extra_gpu_hours, "extra_gpu_hours") if extra_gpu_hours not in (None, "") else None
    amount = _decimal(extra_amount, "extra_amount") if extra_amount not in (None, "") else None
    if hours is not None and hours <= 0:
        errors["extra_gpu_hours"] = "Grant more than zero GPU-hours."
    if hours is not None and flavor is None:
        errors["flavor"] = "Name the flavor whose allowance the GPU-hours are added to."
    if amount is not None and amount <= 0:
        errors["extra_amount"] = "Grant more than zero."
    if errors:
        raise ValidationError(errors)
    override = BudgetOverride(team=team, flavor=flavor if hours is not None else None, extra_gpu_hours=hours,
                              extra_amount=amount, expires_at=expires_at, reason=reason.strip(), granted_by=actor,
                              granted_at=now)
    override.full_clean()
    override.save()
    audit_record(actor=actor, action="budget.override", obj=override, team=team,
                 after={"flavor": flavor.name if override.flavor else None,
                        "extra_gpu_hours": str(hours) if hours is not None else None,
                        "extra_amount": str(amount) if amount is not None else None,
                        "expires_at": expires_at.isoformat(), "reason": override.reason}, source_ip=source_ip)
    enforce.enforcement_changed(team=team)
    return override


def _thresholds_crossed(spent: Decimal, amount: Decimal) -> int:
    return max((t for t in settings.BUDGET_ALERT_THRESHOLDS if spent * 100 >= amount * t), default=0)


def budget_check(*, budget: Budget, now: datetime | None = None) -> list[BudgetAlert]:
    """Record and mail each threshold the month's spend has crossed, once: the unique (budget, threshold) row is
    the proof an alert went out, so concurrent checks cannot send it twice."""
    statement = selectors.team_statement(team=budget.team, month=budget.month, now=now)
    spent = statement.total_cost
    sent = set(budget.alerts.values_list("threshold", flat=True))
    crossed = [t for t in settings.BUDGET_ALERT_THRESHOLDS if spent * 100 >= budget.amount * t and t not in sent]
    fired = []
    for threshold in crossed:
        try:
            with transaction.atomic():
                alert = BudgetAlert.objects.create(budget=budget, threshold=threshold, spent=spent,
                                                   sent_at=now or timezone.now())
                admins = [m.user for m in Membership.objects.filter(team=budget.team, role=Role.ADMIN)
                          .select_related("user")]
                notify_users(
                    users=admins,
                    subject=f"{budget.team.name}: {threshold} % of the {budget.month:%B %Y} GPU budget spent",
                    body=(f"{budget.team.name} has spent {spent} {budget.currency} of its "
                          f"{selectors.money(Decimal(budget.amount))} {budget.currency} budget for "
                          f"{budget.month:%B %Y} ({threshold} % threshold).\n"
                          f"Forecast for the month at the current burn rate: "
                          f"{selectors.forecast(statement, now)} {budget.currency}."),
                )
                audit_record(actor=None, action="budget.alert", obj=budget, team=budget.team,
                             after={"threshold": threshold, "spent": str(spent)})
        except IntegrityError:
            continue  # already sent
        fired.append(alert)
    return fired


def budget_check_due(*, now: datetime | None = None) -> int:
    """Check every budget of the current month, and of the previous one for a day after it ends (its last hours
    are collected after midnight); returns how many alerts fired."""
    now = now or timezone.now()
    months = {selectors.current_month(now), selectors.current_month(now - timedelta(days=1))}
    return sum(len(budget_check(budget=b, now=now))
               for b in Budget.objects.filter(month__in=months).select_related("team").order_by("pk"))
