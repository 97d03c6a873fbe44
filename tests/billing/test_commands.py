"""`manage.py billing_statement`: the same numbers as the pages, in CSV or JSON; bad input is a clear error."""

import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from billing import selectors
from tests.factories import GpuFlavorFactory, RateCardFactory, TeamFactory, UsageHourFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def usage():
    flavor = GpuFlavorFactory(name="h100")
    change = datetime(2026, 10, 16, tzinfo=UTC)
    RateCardFactory(flavor=flavor, price_per_gpu_hour=Decimal("2.00"), effective_from=datetime(2026, 10, 1, tzinfo=UTC),
                    effective_to=change)
    RateCardFactory(flavor=flavor, price_per_gpu_hour=Decimal("3.00"), effective_from=change)
    team = TeamFactory(slug="speech", cost_center="CC-9")
    for day in (3, 20):
        UsageHourFactory(team=team, flavor=flavor, hour=datetime(2026, 10, day, 5, tzinfo=UTC),
                         allocated_gpu_hours=10, used_gpu_hours=4)
    UsageHourFactory(team=TeamFactory(slug="vision"), flavor=flavor, hour=datetime(2026, 10, 3, tzinfo=UTC),
                     allocated_gpu_hours=1, used_gpu_hours=1)
    return team


def run(*args) -> str:
    out = io.StringIO()
    call_command("billing_statement", *args, stdout=out)
    return out.getvalue()


def test_csv_has_one_row_per_flavor_and_rate_period(usage):
    rows = list(csv.DictReader(io.StringIO(run("--team", "speech", "--month", "2026-10", "--format", "csv"))))
    assert [(r["ChargePeriodStart"], r["ChargePeriodEnd"], r["ListUnitPrice"], r["ConsumedQuantity"],
             r["BilledCost"]) for r in rows] == [
        ("2026-10-01T00:00:00Z", "2026-10-16T00:00:00Z", "2.0000", "10.000000", "20.00"),
        ("2026-10-16T00:00:00Z", "2026-11-01T00:00:00Z", "3.0000", "10.000000", "30.00")]
    assert {r["BillingPeriodStart"] for r in rows} == {"2026-10-01T00:00:00Z"}
    assert {r["x_CostCenter"] for r in rows} == {"CC-9"} and {r["x_StatementState"] for r in rows} == {"final"}
    assert list(rows[0]) == selectors.FOCUS_COLUMNS


def test_json_totals_are_the_sum_of_the_lines(usage):
    payload = json.loads(run("--team", "speech", "--month", "2026-10", "--format", "json"))
    assert payload["team"] == "speech" and payload["state"] == "final"
    assert payload["totals"]["cost"] == "50.00" == str(sum(Decimal(line["cost"]) for line in payload["lines"]))
    assert payload["totals"]["idle_cost"] == "30.00"  # 6 idle GPU-hours at 2 + 6 at 3


def test_all_teams_in_one_file(usage):
    payload = json.loads(run("--team", "all", "--month", "2026-10", "--format", "json"))
    assert [p["team"] for p in payload] == ["speech", "vision"]


@pytest.mark.parametrize(("args", "message"), [
    (["--team", "nobody", "--month", "2026-10"], "No team"),
    (["--team", "speech", "--month", "2026-13"], "YYYY-MM"),
    (["--team", "speech", "--month", "October"], "YYYY-MM"),
])
def test_bad_input_is_a_clear_error(usage, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_the_demo_prices_every_flavor_once_with_a_rate_change_and_a_mig_default():
    from billing.models import RateCard
    from composition.management.commands.seed_demo import FLAVORS, Command
    from tenants.models import GpuFlavor
    from tests.factories import ClusterFactory, PlatformAdminFactory

    for cluster_name, flavors in FLAVORS.items():
        cluster = ClusterFactory(name=cluster_name)
        for spec in flavors:
            GpuFlavorFactory(cluster=cluster, **spec)
    admin = PlatformAdminFactory()
    Command()._seed_rates(admin)
    Command()._seed_rates(admin)  # idempotent

    assert RateCard.objects.filter(flavor__name="h100").count() == 2
    assert RateCard.objects.count() == 7 and not RateCard.objects.filter(
        flavor__name__in=["a100-mig-1g", "h100-mps", "l40s-shared"]).exists()
    hour = selectors.floor_hour(datetime.now(UTC))
    priced = {p.flavor_id: p for p in selectors.price_periods(start=hour, end=hour + selectors.HOUR)}
    mig = priced[GpuFlavor.objects.get(name="a100-mig-1g").pk]
    assert mig.parent == "h100" and mig.price == Decimal("4.40") / 7  # exactly a seventh of the rate
    shares = {name: priced[GpuFlavor.objects.get(name=name).pk] for name in ("h100-mps", "l40s-shared")}
    assert (shares["h100-mps"].parent, shares["h100-mps"].price) == ("h100", Decimal("1.10"))  # a quarter of 4.40
    assert (shares["l40s-shared"].parent, shares["l40s-shared"].price) == ("l40s", Decimal("0.55"))
