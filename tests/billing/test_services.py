"""Rate cards (history, overlaps, bad prices), budgets (who may set them) and budget alerts (once each)."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError

from billing import budgets
from billing.models import BudgetAlert, RateCard
from tenants.choices import Role
from tenants.models import AuditEvent
from tests.factories import (
    BudgetFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    RateCardFactory,
    TeamFactory,
    UsageHourFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
NOV = date(2026, 11, 1)


def at(day: int, hour: int = 0, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


@pytest.fixture
def admin():
    return PlatformAdminFactory()


@pytest.fixture
def flavor():
    return GpuFlavorFactory(name="h100")


def test_a_new_rate_closes_the_open_period_and_keeps_history(admin, flavor):
    first = budgets.rate_card_set(actor=admin, flavor=flavor, price="2.00", effective_from=at(1))
    second = budgets.rate_card_set(actor=admin, flavor=flavor, price=Decimal("2.75"), effective_from=at(15, 6))

    first.refresh_from_db()
    assert (first.effective_from, first.effective_to, first.price_per_gpu_hour) == (at(1), at(15, 6), Decimal("2"))
    assert (second.effective_to, second.currency) == (None, "USD")
    assert RateCard.objects.filter(flavor=flavor).count() == 2
    assert list(AuditEvent.objects.filter(object_type="ratecard").values_list("action", flat=True)
                .order_by("id")) == ["rate_card.set", "rate_card.close", "rate_card.set"]


@pytest.mark.parametrize(("price", "message"), [
    ("-0.01", "cannot be negative"), ("abc", "is not a number"), ("NaN", "finite"),
])
def test_bad_prices_are_refused(admin, flavor, price, message):
    with pytest.raises(ValidationError, match=message):
        budgets.rate_card_set(actor=admin, flavor=flavor, price=price, effective_from=at(1))
    assert not RateCard.objects.exists()


def test_overlapping_periods_are_refused(admin, flavor):
    RateCardFactory(flavor=flavor, price_per_gpu_hour=1, effective_from=at(1), effective_to=at(10))
    RateCardFactory(flavor=flavor, price_per_gpu_hour=2, effective_from=at(20))
    # inside a closed period, and before a later one: both would rewrite history
    with pytest.raises(ValidationError, match="covers this time"):
        budgets.rate_card_set(actor=admin, flavor=flavor, price=3, effective_from=at(5))
    with pytest.raises(ValidationError, match="already starts"):
        budgets.rate_card_set(actor=admin, flavor=flavor, price=3, effective_from=at(12))
    with pytest.raises(ValidationError, match="already starts"):
        budgets.rate_card_set(actor=admin, flavor=flavor, price=3, effective_from=at(20))
    # the gap between the periods is free only up to the later card, which would overlap: refused above;
    # after the open period starts, a change closes it
    budgets.rate_card_set(actor=admin, flavor=flavor, price=3, effective_from=at(25))
    assert list(RateCard.objects.filter(flavor=flavor).values_list("effective_from", "effective_to")) == [
        (at(1), at(10)), (at(20), at(25)), (at(25), None)]


def test_rates_change_on_the_hour_with_a_time_zone(admin, flavor):
    with pytest.raises(ValidationError, match="on the hour"):
        budgets.rate_card_set(actor=admin, flavor=flavor, price=1, effective_from=at(1) + timedelta(minutes=30))
    with pytest.raises(ValidationError, match="time zone"):
        budgets.rate_card_set(actor=admin, flavor=flavor, price=1, effective_from=datetime(2026, 11, 1))


def test_only_platform_admins_set_rates(flavor):
    team = TeamFactory()
    team_admin = MembershipFactory(team=team, role=Role.ADMIN).user
    with pytest.raises(PermissionDenied):
        budgets.rate_card_set(actor=team_admin, flavor=flavor, price=1, effective_from=at(1))


def test_team_admins_and_platform_admins_set_budgets(admin, settings):
    team = TeamFactory()
    team_admin = MembershipFactory(team=team, role=Role.ADMIN).user
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    viewer = MembershipFactory(team=team, role=Role.VIEWER).user
    month = date.today().replace(day=1)

    budget = budgets.budget_set(actor=team_admin, team=team, month=month, amount="500")
    assert budget.amount == Decimal(500) and budget.currency == settings.BILLING_CURRENCY
    budget = budgets.budget_set(actor=admin, team=team, month=month, amount=750)
    assert budget.amount == Decimal(750)
    for user in (member, viewer, UserFactory()):
        with pytest.raises(PermissionDenied):
            budgets.budget_set(actor=user, team=team, month=month, amount=1)
    assert AuditEvent.objects.filter(action="budget.set").count() == 2


@pytest.mark.parametrize(("amount", "message"), [("0", "more than zero"), ("-5", "more than zero"),
                                                  ("lots", "not a number")])
def test_bad_budgets_are_refused(admin, amount, message):
    with pytest.raises(ValidationError, match=message):
        budgets.budget_set(actor=admin, team=TeamFactory(), month=date.today().replace(day=1), amount=amount)


def test_a_past_month_budget_cannot_change(admin):
    with pytest.raises(ValidationError, match="over"):
        budgets.budget_set(actor=admin, team=TeamFactory(), month=date(2020, 1, 1), amount=10)


def test_budget_alerts_fire_once_per_threshold_and_mail_the_team_admins(flavor, django_capture_on_commit_callbacks):
    team = TeamFactory(name="Speech")
    team_admin = MembershipFactory(team=team, role=Role.ADMIN, user=UserFactory(email="lead@example.com")).user
    MembershipFactory(team=team, role=Role.MEMBER)
    RateCardFactory(flavor=flavor, price_per_gpu_hour=10, effective_from=at(1))
    budget = BudgetFactory(team=team, month=NOV, amount=100)
    now = at(2, 12)

    UsageHourFactory(team=team, flavor=flavor, hour=at(1, 1), allocated_gpu_hours=7, used_gpu_hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert budgets.budget_check(budget=budget, now=now) == []  # 70 %

    UsageHourFactory(team=team, flavor=flavor, hour=at(1, 2), allocated_gpu_hours=1, used_gpu_hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        fired = budgets.budget_check(budget=budget, now=now)  # 80 %
        assert budgets.budget_check(budget=budget, now=now) == []  # checked again: nothing new
    assert [a.threshold for a in fired] == [80] and fired[0].spent == Decimal("80.00")
    assert len(mail.outbox) == 1 and mail.outbox[0].to == [team_admin.email]
    assert "80 %" in mail.outbox[0].subject and "100.00 USD" in mail.outbox[0].body

    UsageHourFactory(team=team, flavor=flavor, hour=at(1, 3), allocated_gpu_hours=5, used_gpu_hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert [a.threshold for a in budgets.budget_check(budget=budget, now=now)] == [100]
        assert budgets.budget_check_due(now=now) == 0
    assert list(BudgetAlert.objects.values_list("threshold", flat=True).order_by("threshold")) == [80, 100]
    assert len(mail.outbox) == 2


def test_raising_the_budget_lets_a_passed_alert_fire_again(admin, flavor):
    team = TeamFactory()
    month = date.today().replace(day=1)
    RateCardFactory(flavor=flavor, price_per_gpu_hour=1, effective_from=datetime(2020, 1, 1, tzinfo=UTC))
    UsageHourFactory(team=team, flavor=flavor, hour=datetime.combine(month, datetime.min.time(), tzinfo=UTC),
                     allocated_gpu_hours=90, used_gpu_hours=0)
    budget = budgets.budget_set(actor=admin, team=team, month=month, amount=100)
    assert [a.threshold for a in budgets.budget_check(budget=budget)] == [80]
    budgets.budget_set(actor=admin, team=team, month=month, amount=1000)
    assert not budget.alerts.exists()


def test_the_beat_task_checks_this_months_budgets(flavor):
    from billing.tasks import budget_check_task

    team = TeamFactory()
    month = date.today().replace(day=1)
    RateCardFactory(flavor=flavor, price_per_gpu_hour=1, effective_from=datetime(2020, 1, 1, tzinfo=UTC))
    UsageHourFactory(team=team, flavor=flavor, hour=datetime.combine(month, datetime.min.time(), tzinfo=UTC),
                     allocated_gpu_hours=100, used_gpu_hours=0)
    BudgetFactory(team=team, month=month, amount=100)
    assert budget_check_task.apply().get() == 2
    assert budget_check_task.apply().get() == 0
