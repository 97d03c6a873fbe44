"""Budget modes, allowances and overrides: who may set them, what bad input says, what the audit log keeps, and the
holds they make (billing/holds.py) from usage rows, in a fixed number of queries for any number of teams."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from billing import budgets, holds
from billing.choices import BudgetMode
from billing.models import Allowance, UsageHour
from billing.pricing import current_month, floor_hour
from tenants.choices import Role
from tenants.models import AuditEvent
from tests.factories import GpuFlavorFactory, MembershipFactory, PlatformAdminFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    return TeamFactory(slug="nlp")


@pytest.fixture
def flavor():
    return GpuFlavorFactory(name="h100")


def member(team, role):
    return MembershipFactory(team=team, role=role).user


def test_a_team_admin_sets_the_mode_a_member_cannot(team):
    month = current_month()
    budget = budgets.budget_set(actor=member(team, Role.ADMIN), team=team, month=month, amount=100,
                                mode=BudgetMode.HOLD)
    assert budget.mode == BudgetMode.HOLD
    assert budgets.budget_set(actor=member(team, Role.ADMIN), team=team, month=month, amount=200).mode == \
        BudgetMode.HOLD  # kept when not given
    with pytest.raises(PermissionDenied):
        budgets.budget_set(actor=member(team, Role.MEMBER), team=team, month=month, amount=100, mode="notify")
    with pytest.raises(ValidationError) as bad:
        budgets.budget_set(actor=PlatformAdminFactory(), team=team, month=month, amount=100, mode="stop")
    assert "mode" in bad.value.message_dict
    event = AuditEvent.objects.filter(action="budget.set").order_by("-pk").first()
    assert event.after["mode"] == "hold" and event.before == {"amount": "100.0000", "mode": "hold"}


@pytest.mark.parametrize(("gpu_hours", "window_days", "field"), [
    ("abc", 7, "gpu_hours"), (0, 7, "gpu_hours"), (10, 0, "window_days"), (10, 400, "window_days"),
    (10, "week", "window_days")])
def test_an_allowance_refuses_bad_input_with_the_field(team, flavor, gpu_hours, window_days, field):
    with pytest.raises(ValidationError) as bad:
        budgets.allowance_set(actor=PlatformAdminFactory(), team=team, flavor=flavor, gpu_hours=gpu_hours,
                              window_days=window_days)
    assert field in bad.value.message_dict


def test_only_platform_admins_set_allowances_and_grant_overrides(team, flavor):
    admin = member(team, Role.ADMIN)
    with pytest.raises(PermissionDenied):
        budgets.allowance_set(actor=admin, team=team, flavor=flavor, gpu_hours=10, window_days=7)
    with pytest.raises(PermissionDenied):
        budgets.budget_override_grant(actor=admin, team=team, reason="x", expires_at=timezone.now() + timedelta(1))
    allowance = budgets.allowance_set(actor=PlatformAdminFactory(), team=team, flavor=flavor, gpu_hours=10,
                                      window_days=7)
    assert (allowance.gpu_hours, allowance.window_days) == (Decimal(10), 7)
    budgets.allowance_delete(actor=PlatformAdminFactory(), allowance=allowance)
    assert not Allowance.objects.exists()
    assert list(AuditEvent.objects.filter(action__startswith="allowance.").values_list("action", flat=True)
                .order_by("pk")) == ["allowance.set", "allowance.delete"]


@pytest.mark.parametrize(("fields", "field"), [
    ({"expires_at": -1}, "expires_at"), ({"reason": " "}, "reason"),
    ({"extra_gpu_hours": 5, "extra_amount": 10}, "extra_amount"), ({"extra_gpu_hours": 5}, "flavor"),
    ({"extra_amount": -3}, "extra_amount")])
def test_an_override_refuses_bad_input_with_the_field(team, fields, field):
    values = {"reason": "deadline", "expires_at": 6, **fields}
    values["expires_at"] = timezone.now() + timedelta(hours=values["expires_at"])
    with pytest.raises(ValidationError) as bad:
        budgets.budget_override_grant(actor=PlatformAdminFactory(), team=team, **values)
    assert field in bad.value.message_dict


def test_holds_come_from_usage_and_overrides_in_a_fixed_number_of_queries(flavor, django_assert_max_num_queries):
    now = timezone.now()
    admin = PlatformAdminFactory()
    teams = [TeamFactory(slug=f"t{i}") for i in range(4)]
    for i, team in enumerate(teams):
        budgets.allowance_set(actor=admin, team=team, flavor=flavor, gpu_hours=8, window_days=1)
        UsageHour.objects.create(team=team, flavor=flavor, cluster=flavor.cluster, namespace=team.slug,
                                 hour=floor_hour(now) - timedelta(hours=2), allocated_gpu_hours=Decimal(6 + 2 * i),
                                 used_gpu_hours=0)
    budgets.budget_override_grant(actor=admin, team=teams[3], flavor=flavor, extra_gpu_hours=5,
                                  expires_at=now + timedelta(hours=1), reason="deadline")
    with django_assert_max_num_queries(6):
        states = holds.team_holds(teams=teams, now=now)
    # used 6, 8, 10 and 12 of 8 (the last with 5 more granted)
    assert [s.held for s in states.values()] == [False, True, True, False]
    assert states[teams[2].pk].holds[0].over_by == Decimal(2)
    assert [a.used.gpu_hours for s in states.values() for a in s.allowances] == [6, 8, 10, 12]
    later = holds.team_holds(teams=teams, now=now + timedelta(days=1))  # the window has rolled past them
    assert not any(s.held for s in later.values())
