"""The usage page's holds and allowances: what a member sees of a hold and of the allowance used over its window,
what platform admins set there (and what a team admin may not), the API's budget with its holds, and the page's
query count with more allowances and usage."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from billing import budgets, enforce
from billing.models import Allowance, BudgetOverride
from billing.pricing import floor_hour
from tenants.choices import Role
from tests.api.world import token_for
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UsageHourFactory,
    UserFactory,
)
from tests.permissions import request_as

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    cluster = ClusterFactory(name="gpu-east")
    h100 = GpuFlavorFactory(cluster=cluster, name="h100")
    team = TeamFactory(slug="nlp", name="NLP")
    TeamNamespaceFactory(team=team, cluster=cluster)
    users = {role: MembershipFactory(team=team, role=role, user=UserFactory(username=f"nlp-{role}")).user
             for role in (Role.ADMIN, Role.MEMBER, Role.VIEWER)}
    return {"team": team, "flavor": h100, "cluster": cluster, "root": PlatformAdminFactory(username="root"), **users}


def usage(world, gpu_hours, hours_ago=1, flavor=None):
    UsageHourFactory(team=world["team"], flavor=flavor or world["flavor"], allocated_gpu_hours=gpu_hours,
                     used_gpu_hours=0, hour=floor_hour(timezone.now()) - timedelta(hours=hours_ago))


def url(world, name="billing:team-usage"):
    return reverse(name, args=[world["team"].slug])


def test_a_member_sees_the_hold_and_the_allowance_used_over_its_window(client, world):
    budgets.allowance_set(actor=world["root"], team=world["team"], flavor=world["flavor"], gpu_hours=8,
                          window_days=7)
    usage(world, 6)
    usage(world, 4, hours_ago=2)
    usage(world, 50, hours_ago=24 * 8)  # before the window
    enforce.budget_enforce()
    body = request_as(client, world["member"], url(world)).content.decode()
    assert 'id="hold-banner"' in body and 'id="budget-hold"' in body
    assert ("Held by the budget&#x27;s GPU-hour allowance: nlp used 10 of its 8 h100 GPU-hours in the last 7 days, "
            "2 over.") in body
    assert "A platform admin can raise the allowance or grant an override." in body
    assert 'id="allowance-table"' in body and "125.0 %" in body
    # the facts the team page shows too: the allowance used over its window, and that new jobs are held
    assert "h100 allowance, last 7 days</dt><dd>10.0 of 8.0 GPU-hours (125.0 %)" in body and 'id="held-fact"' in body
    assert 'id="allowance-form"' not in body and 'id="override-form"' not in body  # platform admins only


def test_platform_admins_set_allowances_and_grant_overrides_from_the_page(client, world):
    team = world["team"]
    response = request_as(client, world["root"], url(world, "billing:allowance-set"), method="post",
                          data={"flavor": world["flavor"].pk, "gpu_hours": "100", "window_days": "30"})
    assert response.status_code == 302
    assert Allowance.objects.get(team=team).window_days == 30
    response = request_as(client, world["root"], url(world, "billing:allowance-set"), method="post",
                          data={"flavor": world["flavor"].pk, "gpu_hours": "-1", "window_days": "0"})
    assert response.status_code == 400 and "greater than or equal to 0.01" in response.content.decode()
    until = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    response = request_as(client, world["root"], url(world, "billing:override-grant"), method="post",
                          data={"flavor": world["flavor"].pk, "extra_gpu_hours": "20", "expires_at": until,
                                "reason": "paper deadline"})
    assert response.status_code == 302
    override = BudgetOverride.objects.get(team=team)
    assert (override.extra_gpu_hours, override.granted_by) == (Decimal(20), world["root"])
    response = request_as(client, world["root"], url(world, "billing:override-grant"), method="post",
                          data={"extra_gpu_hours": "5", "expires_at": until, "reason": "x"})
    assert response.status_code == 400 and "Name the flavor" in response.content.decode()
    body = request_as(client, world["root"], url(world)).content.decode()
    assert 'id="override-list"' in body and "paper deadline" in body
    response = request_as(client, world["admin"], url(world, "billing:allowance-set"), method="post",
                          data={"flavor": world["flavor"].pk, "gpu_hours": "1000", "window_days": "7"})
    assert response.status_code == 403


def test_a_team_admin_switches_the_budget_to_hold(client, world):
    month = timezone.now().strftime("%Y-%m")
    response = request_as(client, world["admin"], url(world, "billing:budget-set"), method="post",
                          data={"month": month, "amount": "100", "mode": "hold"})
    assert response.status_code == 302
    body = request_as(client, world["viewer"], url(world)).content.decode()
    assert "hold new work when spent" in body and 'id="budget-within"' in body


def test_the_api_says_what_holds_the_team(client, world):
    budgets.allowance_set(actor=world["root"], team=world["team"], flavor=world["flavor"], gpu_hours=8,
                          window_days=1)
    usage(world, 9)
    enforce.budget_enforce()
    response = client.get("/api/v1/teams/nlp/budget/", HTTP_AUTHORIZATION=f"Bearer {token_for(world['member'])}")
    body = response.json()
    assert response.status_code == 200 and body["held"] is True and body["held_since"]
    (hold,) = body["holds"]
    assert (hold["kind"], hold["flavor"], hold["over_by"], hold["unit"]) == ("allowance", "h100", "1.000000",
                                                                            "GPU-hours")
    assert hold["who_lifts"].startswith("A platform admin")
    (allowance,) = body["allowances"]
    assert (allowance["used_gpu_hours"], allowance["gpu_hours"], allowance["spent"]) == ("9.000000", "8.000000",
                                                                                         True)


def test_the_usage_page_costs_the_same_with_more_allowances_and_usage(client, world, django_assert_max_num_queries):
    client.force_login(world["root"])

    def more(count):
        for _ in range(count):
            flavor = GpuFlavorFactory(cluster=world["cluster"])
            budgets.allowance_set(actor=world["root"], team=world["team"], flavor=flavor, gpu_hours=8, window_days=7)
            for hours_ago in (1, 2, 3):
                usage(world, 3, hours_ago=hours_ago, flavor=flavor)
            budgets.budget_override_grant(actor=world["root"], team=world["team"], flavor=flavor, extra_gpu_hours=1,
                                          expires_at=timezone.now() + timedelta(hours=1), reason="more")

    more(2)
    with django_assert_max_num_queries(40) as small:
        assert client.get(url(world)).status_code == 200
    more(6)
    with django_assert_max_num_queries(40) as large:
        assert client.get(url(world)).status_code == 200
    assert len(large.captured_queries) == len(small.captured_queries)
