"""Usage, statements and budgets over the API: the billing selectors' numbers, scoped like every team read."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.selectors import current_month
from tests.factories import BudgetFactory, RateCardFactory, UsageHourFactory

pytestmark = pytest.mark.django_db
V1 = "/api/v1"


@pytest.fixture
def usage(world):
    month = current_month()
    hour = datetime(month.year, month.month, 1, 3, tzinfo=UTC)
    RateCardFactory(flavor=world.flavor, price_per_gpu_hour=Decimal("2.50"),
                    effective_from=hour - timedelta(days=400))
    for n in range(3):
        UsageHourFactory(team=world.team, flavor=world.flavor, hour=hour + timedelta(hours=n),
                         allocated_gpu_hours=8, used_gpu_hours=4)
    UsageHourFactory(team=world.other_team, flavor=world.flavor, hour=hour, allocated_gpu_hours=99)
    BudgetFactory(team=world.team, month=month, amount=Decimal("1000"))
    return month


def test_usage_per_day(world, api_as, usage):
    body = api_as(world.viewer).get(f"{V1}/teams/nlp/usage/").json()
    assert body["days"] == [{"day": f"{usage:%Y-%m}-01", "flavor": "h100", "allocated_gpu_hours": "24.0000",
                             "used_gpu_hours": "12.0000"}]
    assert api_as(world.outsider).get(f"{V1}/teams/nlp/usage/").status_code == 404
    bad = api_as(world.viewer).get(f"{V1}/teams/nlp/usage/", {"start": "2026-13-01"})
    assert bad.status_code == 400 and "start" in bad.json()["error"]["fields"]
    backwards = api_as(world.viewer).get(f"{V1}/teams/nlp/usage/", {"start": "2026-02-01", "end": "2026-01-01"})
    assert "end" in backwards.json()["error"]["fields"]


def test_statement_and_budget(world, api_as, usage):
    body = api_as(world.member).get(f"{V1}/teams/nlp/statements/{usage:%Y-%m}/").json()
    assert body["team"] == "nlp" and body["month"] == f"{usage:%Y-%m}"
    assert Decimal(body["totals"]["allocated_gpu_hours"]) == 24
    assert Decimal(body["totals"]["cost"]) == Decimal("60.00")
    bad = api_as(world.member).get(f"{V1}/teams/nlp/statements/2026-13/")
    assert bad.status_code == 400 and "month" in bad.json()["error"]["fields"]
    budget = api_as(world.member).get(f"{V1}/teams/nlp/budget/").json()
    assert (Decimal(budget["amount"]), Decimal(budget["spent"])) == (Decimal("1000"), Decimal("60"))
    assert api_as(world.outsider).get(f"{V1}/teams/nlp/budget/").status_code == 404


@pytest.mark.parametrize("month, status", [("2026-11", 200), ("2026-13", 400), ("1999-12", 400)])
def test_the_budget_api_and_the_usage_page_accept_the_same_months(world, api_as, client, month, status):
    response = api_as(world.member).get(f"{V1}/teams/nlp/budget/", {"month": month})
    assert response.status_code == status
    client.force_login(world.member)
    page = client.get("/teams/nlp/usage/", {"month": month})
    refused = [str(m) for m in page.context["messages"]]
    assert page.status_code == 200 and (refused == []) == (status == 200)
