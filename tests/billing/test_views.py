"""Usage pages: permissions (another team's usage is a 404, viewers read, admins write), content, downloads and
query budgets that do not grow with the data."""

import csv
import io
import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from billing import selectors
from billing.models import Budget, RateCard
from tenants.choices import Role
from tests.factories import (
    BudgetFactory,
    ClusterFactory,
    CollectedHourFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    RateCardFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UsageHourFactory,
    UserFactory,
)
from tests.permissions import PagePermissionCases, assert_page_permissions, request_as

pytestmark = pytest.mark.django_db
THIS_MONTH = selectors.current_month()
MONTH_START = selectors.month_bounds(THIS_MONTH)[0]


@pytest.fixture
def world():
    cluster = ClusterFactory(name="gpu-east")
    h100 = GpuFlavorFactory(cluster=cluster, name="h100")
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("2.50"), effective_from=MONTH_START - timedelta(days=90))
    team = TeamFactory(slug="nlp", name="NLP", cost_center="CC-7")
    TeamNamespaceFactory(team=team, cluster=cluster)
    for added in (cluster, team):  # in use for months: its gaps and forecast start before this month
        type(added).objects.filter(pk=added.pk).update(created_at=MONTH_START - timedelta(days=90))
        added.refresh_from_db()
    users = {role: MembershipFactory(team=team, role=role, user=UserFactory(username=f"nlp-{role}")).user
             for role in (Role.ADMIN, Role.MEMBER, Role.VIEWER)}
    outsider = MembershipFactory(team=TeamFactory(slug="vision"), role=Role.ADMIN).user
    UsageHourFactory(team=team, flavor=h100, hour=MONTH_START, allocated_gpu_hours=8, used_gpu_hours=2)
    return {"team": team, "flavor": h100, "cluster": cluster, "outsider": outsider,
            "root": PlatformAdminFactory(username="root"), **users}


def usage_url(team):
    return reverse("billing:team-usage", args=[team.slug])


class TestTeamUsagePermissions(PagePermissionCases):
    @pytest.fixture
    def page_url(self, world):
        return usage_url(world["team"])

    @pytest.fixture
    def page_users(self, world):
        return {"allowed": [world["viewer"], world["member"], world["admin"], world["root"]],
                "others_team_user": world["outsider"]}


class TestStatementPermissions(PagePermissionCases):
    @pytest.fixture
    def page_url(self, world):
        return reverse("billing:team-statement", args=[world["team"].slug, f"{THIS_MONTH:%Y-%m}"])

    @pytest.fixture
    def page_users(self, world):
        return {"allowed": [world["viewer"]], "others_team_user": world["outsider"]}


class TestStatementDownloadPermissions(PagePermissionCases):
    @pytest.fixture
    def page_url(self, world):
        return reverse("billing:team-statement-export", args=[world["team"].slug, f"{THIS_MONTH:%Y-%m}", "csv"])

    @pytest.fixture
    def page_users(self, world):
        return {"allowed": [world["viewer"]], "others_team_user": world["outsider"]}


class TestBudgetSetPermissions(PagePermissionCases):
    method = "post"

    @pytest.fixture
    def page_url(self, world):
        self.data = {"month": f"{THIS_MONTH:%Y-%m}", "amount": "900"}
        return reverse("billing:budget-set", args=[world["team"].slug])

    @pytest.fixture
    def page_users(self, world):
        return {"allowed": [world["admin"]], "others_team_user": world["outsider"],
                "forbidden": [world["viewer"], world["member"]]}


@pytest.mark.parametrize("name", ["billing:console-usage", "billing:console-rates"])
def test_console_pages_are_for_platform_admins(client, world, name):
    assert_page_permissions(client, reverse(name), allowed=[world["root"]],
                            forbidden=[world["viewer"], world["admin"], world["outsider"]])


def test_the_usage_page_shows_cost_budget_forecast_and_charts(client, world):
    BudgetFactory(team=world["team"], month=THIS_MONTH, amount=10)
    response = request_as(client, world["viewer"], usage_url(world["team"]))
    body = response.content.decode()
    assert response.status_code == 200
    assert "20.00 USD" in body  # 8 GPU-hours × 2.50
    assert 'id="usage-chart"' in body and 'id="cost-chart"' in body and "vendor/plotly-cartesian.min.js" in body
    assert 'id="budget-banner"' in body and "100 % of the" in body  # 20 of 10 spent
    assert 'id="budget-form"' not in body  # viewers read, admins set


def test_a_team_admin_sets_the_budget_and_bad_input_is_explained(client, world):
    team = world["team"]
    response = request_as(client, world["admin"], reverse("billing:budget-set", args=[team.slug]), method="post",
                          data={"month": f"{THIS_MONTH:%Y-%m}", "amount": "1234.50"})
    assert response.status_code == 302
    assert Budget.objects.get(team=team, month=THIS_MONTH).amount == Decimal("1234.50")
    response = request_as(client, world["admin"], reverse("billing:budget-set", args=[team.slug]), method="post",
                          data={"month": "2026-13", "amount": "-1"})
    body = response.content.decode()
    assert response.status_code == 400 and "YYYY-MM" in body and "greater than or equal to 0.01" in body
    response = request_as(client, world["admin"], reverse("billing:budget-set", args=[team.slug]), method="post",
                          data={"month": "2020-01", "amount": "5"})
    assert response.status_code == 400 and "over" in response.content.decode()


def test_the_statement_csv_has_focus_columns_and_adds_up(client, world):
    team = world["team"]
    UsageHourFactory(team=team, flavor=world["flavor"], hour=MONTH_START + timedelta(hours=1),
                     allocated_gpu_hours=Decimal("1.333333"), used_gpu_hours=1)
    url = reverse("billing:team-statement-export", args=[team.slug, f"{THIS_MONTH:%Y-%m}", "csv"])
    response = request_as(client, world["viewer"], url)
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert list(rows[0]) == selectors.FOCUS_COLUMNS
    assert {c for c in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
                        "ResourceId", "ResourceName", "ConsumedQuantity", "ConsumedUnit", "ListUnitPrice",
                        "BilledCost", "BillingCurrency", "Tags", "x_CostCenter")} <= set(rows[0])
    row = rows[0]
    assert (row["SubAccountId"], row["ResourceName"], row["ConsumedUnit"], row["BillingCurrency"]) == (
        "nlp", "h100", "GPU-Hours", "USD")
    assert row["ConsumedQuantity"] == "9.333333" and row["BilledCost"] == "23.33"  # 9.333333 × 2.50 = 23.3333
    assert json.loads(row["Tags"])["cost-center"] == "CC-7" and row["x_CostCenter"] == "CC-7"
    assert row["BillingPeriodStart"] == MONTH_START.strftime("%Y-%m-%dT%H:%M:%SZ")

    payload = json.loads(request_as(client, world["viewer"], url.replace(".csv", ".json")).content)
    assert payload["totals"]["cost"] == "23.33" and payload["lines"][0]["flavor"] == "h100"
    assert request_as(client, world["viewer"], url.replace(".csv", ".xml")).status_code == 404


def test_a_malformed_month_is_a_404_in_a_path_and_a_message_in_a_query(client, world):
    team = world["team"]
    assert request_as(client, world["viewer"], reverse("billing:team-statement", args=[team.slug, "2026-13"])
                      ).status_code == 404
    response = request_as(client, world["viewer"], usage_url(team) + "?month=nope")
    assert response.status_code == 200 and "YYYY-MM" in response.content.decode()


@override_settings(BILLING_BACKFILL_DAYS=0)  # last month's gaps are past collecting, whatever day it is
def test_the_statement_page_lists_missing_hours(client, world):
    last_month = (THIS_MONTH - timedelta(days=1)).replace(day=1)
    start = selectors.month_bounds(last_month)[0]
    CollectedHourFactory(cluster=world["cluster"], hour=start + timedelta(hours=5), state="failed",
                         message="Prometheus did not answer in 30 s")
    response = request_as(client, world["viewer"],
                          reverse("billing:team-statement", args=[world["team"].slug, f"{last_month:%Y-%m}"]))
    body = response.content.decode()
    assert 'id="missing-hours"' in body and "Prometheus did not answer in 30 s" in body and "Download CSV" in body
    assert "Final" in body


def test_a_month_with_hours_still_being_collected_is_not_final_and_says_why(client, world):
    last_month = (THIS_MONTH - timedelta(days=1)).replace(day=1)
    start, end = selectors.month_bounds(last_month)
    from billing.models import CollectedHour

    hours = [start + timedelta(hours=i) for i in range(int((end - start) / timedelta(hours=1)))]
    CollectedHour.objects.bulk_create([CollectedHour(cluster=world["cluster"], hour=h, state="collected",
                                                     collected_at=end) for h in hours[:-1]])
    CollectedHourFactory(cluster=world["cluster"], hour=hours[-1], state="partial", steps_missing=10,
                         message="dcgm-exporter answered for 50 of 60 steps")
    url = reverse("billing:team-statement", args=[world["team"].slug, f"{last_month:%Y-%m}"])
    with override_settings(BILLING_BACKFILL_DAYS=(timezone.now() - end).days + 2):
        body = request_as(client, world["viewer"], url).content.decode()
        assert "Awaiting collection" in body and 'id="awaiting-collection"' in body and ">Final<" not in body
        assert "dcgm-exporter answered for 50 of 60 steps" in body
    with override_settings(BILLING_BACKFILL_DAYS=max(0, (timezone.now() - end).days - 1)):
        body = request_as(client, world["viewer"], url).content.decode()
        assert "Final" in body and "Awaiting collection" not in body


def test_previous_month_stops_at_the_first_month_with_data(client, world):
    team = world["team"]
    first = selectors.first_month(team=team)
    assert first == selectors.current_month(MONTH_START - timedelta(days=90))  # the team's creation
    body = request_as(client, world["viewer"], reverse("billing:team-statement", args=[
        team.slug, f"{first:%Y-%m}"])).content.decode()
    before = (first - timedelta(days=1)).replace(day=1)
    assert f"{before:%Y-%m}" not in body and "← " not in body
    following = (first + timedelta(days=32)).replace(day=1)
    body = request_as(client, world["viewer"], reverse("billing:team-statement", args=[
        team.slug, f"{following:%Y-%m}"])).content.decode()
    assert f"← {first:%b %Y}" in body


def test_platform_admins_set_rates_from_the_console(client, world):
    flavor = world["flavor"]
    url = reverse("billing:console-rates")
    start = selectors.floor_hour(timezone.now()) + timedelta(days=1)
    response = request_as(client, world["root"], url, method="post", data={
        "flavor": flavor.pk, "price": "3.10", "effective_from": start.strftime("%Y-%m-%dT%H:%M"), "note": "new"})
    assert response.status_code == 302
    assert RateCard.objects.get(flavor=flavor, effective_to__isnull=True).price_per_gpu_hour == Decimal("3.10")
    response = request_as(client, world["root"], url, method="post", data={
        "flavor": flavor.pk, "price": "-1", "effective_from": start.strftime("%Y-%m-%dT%H:%M")})
    assert response.status_code == 400 and "greater than or equal to 0" in response.content.decode()
    response = request_as(client, world["root"], url, method="post", data={
        "flavor": flavor.pk, "price": "1", "effective_from": (start - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")})
    assert response.status_code == 400 and "covers this time" in response.content.decode()
    response = request_as(client, world["outsider"], url, method="post", data={
        "flavor": flavor.pk, "price": "0", "effective_from": start.strftime("%Y-%m-%dT%H:%M")})
    assert response.status_code == 403


def _more_data(world, teams: int):
    for i in range(teams):
        team = TeamFactory(cost_center=f"CC-{i % 3}")
        TeamNamespaceFactory(team=team, cluster=world["cluster"])
        flavor = GpuFlavorFactory(cluster=world["cluster"])
        RateCardFactory(flavor=flavor, effective_from=MONTH_START)
        BudgetFactory(team=team, month=THIS_MONTH)
        for hour in range(3):
            UsageHourFactory(team=team, flavor=flavor, hour=MONTH_START + timedelta(hours=hour))
            UsageHourFactory(team=world["team"], flavor=flavor, hour=MONTH_START + timedelta(hours=hour))


@pytest.mark.parametrize(("name", "user", "budget"), [
    ("billing:team-usage", "viewer", 30), ("billing:team-statement", "viewer", 20),
    ("billing:console-usage", "root", 25), ("billing:console-rates", "root", 12)])
def test_query_counts_do_not_grow_with_data(client, world, django_assert_max_num_queries, name, user, budget):
    args = {"billing:team-usage": [world["team"].slug],
            "billing:team-statement": [world["team"].slug, f"{THIS_MONTH:%Y-%m}"]}.get(name, [])
    url = reverse(name, args=args)
    client.force_login(world[user])
    _more_data(world, 2)
    with django_assert_max_num_queries(budget) as small:
        assert client.get(url).status_code == 200
    _more_data(world, 12)
    with django_assert_max_num_queries(budget) as large:
        assert client.get(url).status_code == 200
    assert len(large.captured_queries) == len(small.captured_queries)


def test_the_team_page_links_to_usage(client, world):
    body = request_as(client, world["viewer"], reverse("tenants:team-detail", args=["nlp"])).content.decode()
    assert usage_url(world["team"]) in body


def test_an_archived_team_keeps_its_usage_pages(client, world):
    team = world["team"]
    team.state, team.name = "archived", "NLP (archived)"
    team.save()
    body = request_as(client, world["root"], usage_url(team)).content.decode()
    assert "20.00 USD" in body and "NLP (archived)" in body


def test_months_before_now_are_final(client, world):
    last = (THIS_MONTH - timedelta(days=1)).replace(day=1)
    statement = selectors.team_statement(team=world["team"], month=last)
    assert statement.is_final and statement.state_label == "Final"
    assert date.today() >= last and datetime.now(UTC) >= statement.end
