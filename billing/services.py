"""Every write to billing data: rate cards, budgets and their alerts, and the collection of usage rows.

Writes validate, save and audit inside one transaction; mail goes out on commit.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from jobs.models import Job
from tenants.choices import Role, Sharing
from tenants.models import Cluster, GpuFlavor, Membership, Team, TeamNamespace
from tenants.selectors import is_platform_admin, team_role
from tenants.services import audit_record, notify_users

from . import metrics, selectors
from .choices import HourState
from .models import Budget, BudgetAlert, CollectedHour, JobUsageHour, RateCard, UsageHour

logger = logging.getLogger(__name__)

# --- Rates and budgets ---------------------------------------------------------------------------------------


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
def budget_set(*, actor, team: Team, month: date, amount, source_ip: str | None = None) -> Budget:
    """Set (or change) a team's budget for a month; team admins and platform admins only. Changing the amount
    forgets the alerts of thresholds the new amount is no longer past, so they can fire again."""
    if not can_set_budget(user=actor, team=team):
        raise PermissionDenied("Only the team's admins and platform admins set its budget.")
    amount = _decimal(amount, "amount")
    if amount <= 0:
        raise ValidationError({"amount": "A budget must be more than zero."})
    if month.day != 1:
        raise ValidationError({"month": "A budget is for a whole month."})
    if month < selectors.current_month():
        raise ValidationError({"month": "That month is over; its budget can no longer change."})
    budget = Budget.objects.select_for_update().filter(team=team, month=month).first()
    before = {"amount": str(budget.amount)} if budget else None
    budget = budget or Budget(team=team, month=month, currency=settings.BILLING_CURRENCY)
    budget.amount = amount
    budget.full_clean()
    budget.save()
    statement = selectors.team_statement(team=team, month=month)
    budget.alerts.filter(threshold__gt=_thresholds_crossed(statement.total_cost, amount)).delete()
    audit_record(actor=actor, action="budget.set", obj=budget, team=team, before=before,
                 after={"amount": str(amount), "month": month.isoformat()}, source_ip=source_ip)
    return budget


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


# --- Collection ------------------------------------------------------------------------------------------------
# The ledger (CollectedHour) is the record of every collection: no audit event per hour, it would only repeat it.

GPU_HOURS_QUANTUM = Decimal("0.000001")


def _gpu_hours(value: float) -> Decimal:
    return Decimal(repr(max(0.0, value))).quantize(GPU_HOURS_QUANTUM)


def _flavor_for(flavors: list[GpuFlavor], model: str, notes: set[str]) -> GpuFlavor:
    """Flavors sharing one resource name (GPU pools told apart by node labels) are told apart by GPU model."""
    if len(flavors) == 1:
        return flavors[0]
    matching = [f for f in flavors if model and f.gpu_model == model]
    if len(matching) == 1:
        return matching[0]
    notes.add(f"{flavors[0].resource_name} on a {model or 'unknown'} GPU matches {len(flavors)} flavors: "
              f"counted as {flavors[0].name}")
    return flavors[0]


def _usage_rows(*, cluster: Cluster, usage: metrics.HourUsage) -> tuple[list[UsageHour], list[JobUsageHour], set]:
    """Turn a source's answer into rows: namespace → team, resource (and GPU model) → flavor, job label → job."""
    teams = {tn.team.namespace: tn.team for tn in TeamNamespace.objects.filter(cluster=cluster).select_related("team")}
    by_resource: dict[str, list[GpuFlavor]] = {}
    for flavor in GpuFlavor.objects.filter(cluster=cluster).order_by("name"):
        by_resource.setdefault(metrics.ksm_resource(flavor.resource_name), []).append(flavor)
    notes: set[str] = set()
    totals: dict[tuple[int, int], tuple[Team, GpuFlavor, str, metrics.Usage]] = {}
    for (namespace, resource, model), measured in sorted(usage.namespaces.items()):
        team, flavors = teams.get(namespace), by_resource.get(resource)
        if team is None or not flavors:
            if measured.allocated_gpu_hours > 0:
                notes.add(f"{resource} in namespace {namespace}: " + (
                    "no team owns the namespace" if team is None else "no flavor has this resource"))
            continue
        flavor = _flavor_for(flavors, model, notes)
        totals.setdefault((team.pk, flavor.pk), (team, flavor, namespace, metrics.Usage()))[3].add(measured)
    rows = []
    for team, flavor, namespace, total in totals.values():
        allocated = _gpu_hours(total.allocated_gpu_hours)
        scale = float(flavor.gpu_fraction) if flavor.sharing == Sharing.MIG else 1.0
        rows.append(UsageHour(team=team, flavor=flavor, cluster=cluster, namespace=namespace, hour=usage.hour,
                              allocated_gpu_hours=allocated,
                              # Utilisation samples and requests are taken a few seconds apart: never above.
                              used_gpu_hours=min(allocated, _gpu_hours(total.used_gpu_hours)),
                              gpu_memory_used_gib_avg=round(total.memory_gib_hours, 3),
                              energy_kwh=_gpu_hours(total.energy_kwh * scale)))
    # A pod's job label is only trusted for a job of the team that owns the pod's namespace, on this cluster.
    job_ids = {int(job) for _, job in usage.jobs if job.isdigit()}
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=job_ids, cluster=cluster).select_related("team", "flavor")}
    job_rows = []
    for (namespace, label), measured in sorted(usage.jobs.items()):
        job = jobs.get(int(label)) if label.isdigit() else None
        if job is None or job.team.namespace != namespace:
            continue
        allocated = _gpu_hours(measured.allocated_gpu_hours)
        if allocated <= 0:
            continue
        used = min(allocated, _gpu_hours(measured.used_gpu_hours))
        job_rows.append(JobUsageHour(job=job, flavor=job.flavor, hour=usage.hour, allocated_gpu_hours=allocated,
                                     used_gpu_hours=used, utilisation_avg=round(float(used / allocated), 4)))
    return rows, job_rows, notes


def _ledger(*, cluster: Cluster, hour: datetime, state: str, message: str) -> CollectedHour:
    """Record the outcome of one attempt; the row lock also queues concurrent collections of the same hour."""
    ledger, _ = CollectedHour.objects.select_for_update().get_or_create(
        cluster=cluster, hour=hour, defaults={"state": state, "collected_at": timezone.now()})
    ledger.state, ledger.message, ledger.collected_at = state, message, timezone.now()
    ledger.attempts += 1
    ledger.full_clean()
    ledger.save()
    return ledger


def usage_collect_hour(*, cluster: Cluster, hour: datetime, source: metrics.MetricsSource | None = None,
                       now: datetime | None = None) -> CollectedHour:
    """Collect one complete hour of one cluster and replace its rows, all in one transaction.

    Re-collecting an hour replaces what it held, so nothing is counted twice. When the source fails or answers
    with gaps or NaN, the rows of the hour are left exactly as they were and the ledger says why.
    """
    hour = metrics.check_hour(hour)
    if hour + metrics.HOUR > (now or timezone.now()):
        raise ValidationError(f"The hour {hour:%Y-%m-%d %H:00} UTC is not over yet.")
    try:
        usage = (source or metrics.source_for(cluster)).hour_usage(hour)
    except metrics.MetricsError as exc:
        logger.warning("usage of %s at %s not collected: %s", cluster.name, hour.isoformat(), exc)
        with transaction.atomic():
            return _ledger(cluster=cluster, hour=hour, state=HourState.FAILED, message=str(exc))
    if usage.problems:
        with transaction.atomic():
            return _ledger(cluster=cluster, hour=hour, state=HourState.PARTIAL, message="; ".join(usage.problems))
    with transaction.atomic():
        rows, job_rows, notes = _usage_rows(cluster=cluster, usage=usage)
        ledger = _ledger(cluster=cluster, hour=hour, state=HourState.COLLECTED, message="; ".join(sorted(notes)))
        UsageHour.objects.filter(cluster=cluster, hour=hour).delete()
        JobUsageHour.objects.filter(job__cluster=cluster, hour=hour).delete()
        for row in rows:
            row.full_clean(validate_unique=False, validate_constraints=False)
        UsageHour.objects.bulk_create(rows)
        JobUsageHour.objects.bulk_create(job_rows)
    return ledger


def usage_hours_due(*, cluster: Cluster, now: datetime) -> list[datetime]:
    """The hours still to collect: every complete hour of the backfill window (and of the cluster's life) that
    is missing from the ledger or failed or partial last time, newest first."""
    last = selectors.floor_hour(now) - metrics.HOUR
    first = max(last - timedelta(days=settings.BILLING_BACKFILL_DAYS) + metrics.HOUR,
                selectors.floor_hour(cluster.created_at))
    done = set(CollectedHour.objects.filter(cluster=cluster, hour__gte=first, hour__lte=last,
                                            state=HourState.COLLECTED).values_list("hour", flat=True))
    hours = []
    hour = last
    while hour >= first:
        if hour not in done:
            hours.append(hour)
        hour -= metrics.HOUR
    return hours


def usage_collect_due(*, now: datetime | None = None) -> dict[str, int]:
    """Collect the last complete hour of every active cluster and backfill what is missing in the window.

    A cluster whose source fails is left for the next run after its first failed hour: when Prometheus is down,
    each further hour would only wait for the same timeout. Returns how many hours each cluster collected.
    """
    now = now or timezone.now()
    collected = {}
    for cluster in Cluster.objects.filter(active=True).order_by("pk"):
        collected[cluster.name] = 0
        source = None
        for hour in usage_hours_due(cluster=cluster, now=now):
            try:
                source = source or metrics.source_for(cluster)
            except metrics.MetricsError as exc:
                with transaction.atomic():
                    _ledger(cluster=cluster, hour=hour, state=HourState.FAILED, message=str(exc))
                break
            ledger = usage_collect_hour(cluster=cluster, hour=hour, source=source, now=now)
            if ledger.state == HourState.FAILED:
                break
            collected[cluster.name] += ledger.state == HourState.COLLECTED
    return collected
