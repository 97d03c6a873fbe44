"""Statements, roll-ups, forecasts, missing hours and idle jobs, from usage rows made with factories."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from billing import selectors
from billing.choices import StatementState
from jobs.choices import JobState
from jobs.models import Job
from tenants.choices import Sharing, TeamState
from tests.factories import (
    BudgetFactory,
    ClusterFactory,
    CollectedHourFactory,
    GpuFlavorFactory,
    JobUsageHourFactory,
    PriorityTierFactory,
    RateCardFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UsageHourFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
NOV = date(2026, 11, 1)
START = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)
AFTER_NOV = datetime(2026, 12, 2, tzinfo=UTC)
H = timedelta(hours=1)


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def backdate(obj, when: datetime):
    """Rows are created now; the months under test are older (a cluster's gaps and a team's forecast start at the
    hour it was added)."""
    type(obj).objects.filter(pk=obj.pk).update(created_at=when)
    obj.refresh_from_db()
    return obj


@pytest.fixture
def h100():
    flavor = GpuFlavorFactory(name="h100", gpu_model="NVIDIA H100 80GB HBM3")
    backdate(flavor.cluster, START - 30 * 24 * H)
    return flavor


def test_each_hour_is_priced_at_the_rate_in_force_then(h100):
    team = TeamFactory()
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("2.00"), effective_from=START, effective_to=at(15))
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("3.50"), effective_from=at(15))
    # 14 days × 1 h before the change, 10 hours after it, 8 GPU-hours each.
    for day in range(1, 15):
        UsageHourFactory(team=team, flavor=h100, hour=at(day, 12), allocated_gpu_hours=8, used_gpu_hours=2)
    for hour in range(10):
        UsageHourFactory(team=team, flavor=h100, hour=at(15, hour), allocated_gpu_hours=8, used_gpu_hours=6)

    statement = selectors.team_statement(team=team, month=NOV, now=AFTER_NOV)

    assert statement.state == StatementState.FINAL
    assert [(line.unit_price, line.allocated_gpu_hours, line.cost) for line in statement.lines] == [
        (Decimal("2.00"), Decimal(112), Decimal("224.00")), (Decimal("3.50"), Decimal(80), Decimal("280.00"))]
    assert [line.charge_start for line in statement.lines] == [START, at(15)]
    assert statement.lines[0].idle_cost == Decimal("168.00")  # (112 − 28) × 2
    assert statement.lines[1].idle_cost == Decimal("70.00")  # (80 − 60) × 3.5
    assert statement.lines[1].efficiency == Decimal("0.7500")
    assert statement.total_cost == Decimal("504.00")


def test_lines_are_rounded_once_and_the_total_is_their_sum():
    team = TeamFactory()
    flavors = [GpuFlavorFactory(name=f"f{i}") for i in range(3)]
    for flavor in flavors:
        RateCardFactory(flavor=flavor, price_per_gpu_hour=Decimal("1.0001"), effective_from=START)
        for hour in range(3):  # 3 × 0.333333 GPU-hours × 1.0001 = 1.00009… per flavor
            UsageHourFactory(team=team, flavor=flavor, hour=at(2, hour), allocated_gpu_hours=Decimal("0.333333"),
                             used_gpu_hours=Decimal("0.111111"))

    statement = selectors.team_statement(team=team, month=NOV, now=AFTER_NOV)

    assert [line.cost for line in statement.lines] == [Decimal("1.00")] * 3
    assert statement.total_cost == Decimal("3.00") == sum(line.cost for line in statement.lines)
    for line in statement.lines:
        assert line.allocated_gpu_hours == Decimal("0.999999")
        assert line.cost - line.idle_cost == Decimal("0.33")  # used part, rounded on its own: 0.333333 × 1.0001


def test_a_mig_slice_defaults_to_its_fraction_of_the_parent_rate_unless_priced(h100):
    mig = GpuFlavorFactory(cluster=h100.cluster, name="h100-1g", resource_name="nvidia.com/mig-1g.10gb",
                           sharing=Sharing.MIG, gpu_fraction=Decimal("0.1429"), gpu_model=h100.gpu_model)
    GpuFlavorFactory(name="elsewhere")  # another cluster's whole GPU is not the parent
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("7.00"), effective_from=START)
    RateCardFactory(flavor=mig, price_per_gpu_hour=Decimal("1.50"), effective_from=at(20))
    team = TeamFactory()
    UsageHourFactory(team=team, flavor=mig, hour=at(10), allocated_gpu_hours=7, used_gpu_hours=7)
    UsageHourFactory(team=team, flavor=mig, hour=at(21), allocated_gpu_hours=7, used_gpu_hours=7)

    lines = selectors.team_statement(team=team, month=NOV, now=AFTER_NOV).lines

    assert [(line.unit_price, line.price_from, line.cost) for line in lines] == [
        (Decimal("1.00"), "h100", Decimal("7.00")),  # exactly a seventh: 7 slice-hours cost one GPU-hour
        (Decimal("1.50"), "", Decimal("10.50"))]
    assert (lines[0].charge_start, lines[0].charge_end) == (START, at(20))


def test_hours_without_a_rate_are_shown_unpriced_not_dropped(h100):
    team = TeamFactory()
    UsageHourFactory(team=team, flavor=h100, hour=at(3), allocated_gpu_hours=4, used_gpu_hours=1)

    statement = selectors.team_statement(team=team, month=NOV, now=AFTER_NOV)

    assert statement.unpriced_gpu_hours == Decimal(4)
    assert statement.total_cost == 0 and not statement.lines[0].priced
    row = selectors.focus_rows(statement)[0]
    assert (row["BilledCost"], row["ListUnitPrice"], row["x_UnpricedGpuHours"]) == ("0", "", "4.000000")


def test_rows_of_other_months_and_teams_stay_out(h100):
    team, other = TeamFactory(), TeamFactory()
    RateCardFactory(flavor=h100, price_per_gpu_hour=1, effective_from=START - 30 * 24 * H)
    UsageHourFactory(team=team, flavor=h100, hour=START - H, allocated_gpu_hours=5, used_gpu_hours=0)
    UsageHourFactory(team=team, flavor=h100, hour=DEC, allocated_gpu_hours=5, used_gpu_hours=0)
    UsageHourFactory(team=other, flavor=h100, hour=at(4), allocated_gpu_hours=5, used_gpu_hours=0)
    UsageHourFactory(team=team, flavor=h100, hour=DEC - H, allocated_gpu_hours=3, used_gpu_hours=0)

    assert selectors.team_statement(team=team, month=NOV, now=AFTER_NOV).total_cost == Decimal("3.00")


def test_draft_while_the_month_is_open_and_history_survives_rename_and_archive(h100):
    team = TeamFactory(name="Vision")
    RateCardFactory(flavor=h100, price_per_gpu_hour=2, effective_from=START)
    UsageHourFactory(team=team, flavor=h100, hour=at(2), allocated_gpu_hours=10, used_gpu_hours=5)
    team.name, team.state = "Vision (old)", TeamState.ARCHIVED
    team.save()

    statement = selectors.team_statement(team=team, month=NOV, now=at(20))

    assert statement.state == StatementState.DRAFT
    assert statement.total_cost == Decimal("20.00") and statement.team.name == "Vision (old)"


def test_rollups_by_cost_centre_and_department_add_up(h100):
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("1.25"), effective_from=START)
    research = TeamFactory(slug="research", cost_center="CC-1")
    teams = [TeamFactory(cost_center="CC-1", parent=research), TeamFactory(cost_center="CC-1", parent=research),
             TeamFactory(cost_center="CC-2")]
    for i, team in enumerate(teams):
        UsageHourFactory(team=team, flavor=h100, hour=at(5), allocated_gpu_hours=i + 1, used_gpu_hours=0)
    admin = UserFactory(is_staff=True)

    statements = selectors.all_statements(user=admin, month=NOV, now=AFTER_NOV)
    rollups = selectors.rollups(statements)

    by_cc = {r.key: r.cost for r in rollups["cost_center"]}
    assert by_cc == {"CC-1": Decimal("3.75"), "CC-2": Decimal("3.75")}
    by_dept = {r.key: (r.teams, r.cost) for r in rollups["department"]}
    assert by_dept[research.name] == (3, Decimal("3.75"))  # the department itself and its two teams
    assert sum(r.cost for r in rollups["department"]) == sum(s.total_cost for s in statements) == Decimal("7.50")


def test_missing_hours_are_runs_per_cluster_with_their_state(h100):
    team = TeamFactory()
    TeamNamespaceFactory(team=team, cluster=h100.cluster)
    TeamNamespaceFactory(cluster=ClusterFactory())  # another team's cluster is not this team's concern
    for hour in range(0, 6):
        if hour in (2, 3):
            continue
        CollectedHourFactory(cluster=h100.cluster, hour=at(1, hour))
    CollectedHourFactory(cluster=h100.cluster, hour=at(1, 3), state="failed", message="Prometheus: timeout")

    statement = selectors.team_statement(team=team, month=NOV, now=at(1, 6) + timedelta(minutes=5))

    assert [(m.start, m.end, m.state, m.message, m.retryable) for m in statement.missing] == [
        (at(1, 2), at(1, 3), "missing", "not collected yet", True),
        (at(1, 3), at(1, 4), "failed", "Prometheus: timeout", True)]
    assert statement.missing_hour_count == 2


def _collect_month(cluster, *, except_hours=()):
    from billing.models import CollectedHour

    CollectedHour.objects.bulk_create([
        CollectedHour(cluster=cluster, hour=START + i * H, state="collected", collected_at=DEC)
        for i in range(30 * 24) if START + i * H not in except_hours])


def test_a_month_is_not_final_while_hours_of_it_are_missing_and_retried(h100, settings):
    settings.BILLING_BACKFILL_DAYS = 7
    team = TeamFactory()
    TeamNamespaceFactory(team=team, cluster=h100.cluster)
    _collect_month(h100.cluster, except_hours=[at(30, 22), at(30, 23)])
    CollectedHourFactory(cluster=h100.cluster, hour=at(30, 22), state="partial",
                         message="dcgm-exporter answered for 50 of 60 steps", steps_missing=10)

    pending = selectors.team_statement(team=team, month=NOV, now=DEC + 2 * H)
    assert (pending.state, pending.is_final, pending.state_label) == (StatementState.PENDING, False,
                                                                      "Awaiting collection")
    assert [(m.state, m.message) for m in pending.missing] == [
        ("partial", "dcgm-exporter answered for 50 of 60 steps"), ("missing", "not collected yet")]

    # Past the backfill window nothing will collect them again: the month is final, its gaps still shown.
    final = selectors.team_statement(team=team, month=NOV, now=DEC + 8 * 24 * H)
    assert final.state == StatementState.FINAL and len(final.missing) == 2
    assert final.missing[1].message == "never collected, and older than the 7-day backfill window"
    assert not any(m.retryable for m in final.missing)

    # Or once they are collected.
    from billing.models import CollectedHour

    CollectedHour.objects.filter(hour=at(30, 22)).update(state="collected")
    CollectedHourFactory(cluster=h100.cluster, hour=at(30, 23))
    assert selectors.team_statement(team=team, month=NOV, now=DEC + 2 * H).state == StatementState.FINAL


def test_a_cluster_added_mid_month_is_not_missing_the_hours_before_it(h100):
    team = TeamFactory()
    TeamNamespaceFactory(team=team, cluster=backdate(ClusterFactory(), at(10, 5) + 20 * timedelta(minutes=1)))
    statement = selectors.team_statement(team=team, month=NOV, now=at(10, 8))
    assert [(m.start, m.end) for m in statement.missing] == [(at(10, 5), at(10, 8))]


def test_the_forecast_of_a_team_created_mid_month_uses_the_hours_it_existed(h100):
    team = backdate(TeamFactory(), at(16, 0) + timedelta(minutes=30))
    TeamNamespaceFactory(team=team, cluster=h100.cluster)
    RateCardFactory(flavor=h100, price_per_gpu_hour=1, effective_from=START)
    _collect_month(h100.cluster)
    for hour in range(10):  # 10 hours since it was created, at 2 per hour
        UsageHourFactory(team=team, flavor=h100, hour=at(16, hour), allocated_gpu_hours=2, used_gpu_hours=1)
    statement = selectors.team_statement(team=team, month=NOV, now=at(16, 10))
    # 2 per hour over the 15 days it exists in November, not diluted over the 15 days before it did.
    assert selectors.forecast(statement, now=at(16, 10)) == Decimal(2 * 15 * 24)


def test_seven_slice_hours_cost_exactly_one_gpu_hour_at_any_volume(h100):
    mig = GpuFlavorFactory(cluster=h100.cluster, name="h100-1g", resource_name="nvidia.com/mig-1g.10gb",
                           sharing=Sharing.MIG, gpu_fraction=Decimal("0.1429"), gpu_model=h100.gpu_model)
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("2.00"), effective_from=START)
    team = TeamFactory()
    for hour in range(100):
        UsageHourFactory(team=team, flavor=mig, hour=START + hour * H, allocated_gpu_hours=7, used_gpu_hours=0)
    line = selectors.team_statement(team=team, month=NOV, now=AFTER_NOV).lines[0]
    assert line.cost == Decimal("200.00")  # 0.1429 would have made it 200.06
    assert selectors.focus_rows(selectors.team_statement(team=team, month=NOV, now=AFTER_NOV))[0][
        "ListUnitPrice"] == "0.2857142857"


def test_forecast_extrapolates_the_burn_rate_over_collected_hours(h100):
    team = backdate(TeamFactory(), START - 30 * 24 * H)
    TeamNamespaceFactory(team=team, cluster=h100.cluster)
    RateCardFactory(flavor=h100, price_per_gpu_hour=1, effective_from=START)
    for hour in range(10):  # 10 hours elapsed, 8 collected at 3 per hour, 2 missing
        if hour < 8:
            CollectedHourFactory(cluster=h100.cluster, hour=at(1, hour))
            UsageHourFactory(team=team, flavor=h100, hour=at(1, hour), allocated_gpu_hours=3, used_gpu_hours=3)
    statement = selectors.team_statement(team=team, month=NOV, now=at(1, 10))

    assert statement.total_cost == Decimal("24.00")
    assert selectors.forecast(statement, now=at(1, 10)) == Decimal("2160.00")  # 3 per hour × 720 hours

    budget = BudgetFactory(team=team, month=NOV, amount=2000)
    status = selectors.budget_status(team=team, statement=statement, now=at(1, 10))
    assert status.budget == budget and status.forecast_percent == Decimal("108.0") and status.level == 0


def test_a_final_month_forecasts_what_it_spent(h100):
    team = TeamFactory()
    RateCardFactory(flavor=h100, price_per_gpu_hour=1, effective_from=START)
    UsageHourFactory(team=team, flavor=h100, hour=at(1), allocated_gpu_hours=3, used_gpu_hours=3)
    statement = selectors.team_statement(team=team, month=NOV, now=AFTER_NOV)
    assert selectors.forecast(statement, now=AFTER_NOV) == Decimal("3.00")


def _running_job(team, flavor, *, workers=1, gpus=4, state=JobState.RUNNING):
    user = UserFactory()
    return Job.objects.create(team=team, cluster=flavor.cluster, flavor=flavor, priority_tier=PriorityTierFactory(),
                              kind="batch", name="train", image="registry.example.com/train:1", workers=workers,
                              gpus_per_worker=gpus, submitted_by=user, state=state)


def test_idle_jobs_stayed_under_the_threshold_for_the_whole_window(h100, settings):
    settings.IDLE_GPU_THRESHOLD, settings.IDLE_GPU_WINDOW_HOURS = 0.05, 2
    team = TeamFactory()
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("2.50"), effective_from=START)
    idle = _running_job(team, h100)
    busy_once = _running_job(team, h100)
    short = _running_job(team, h100)
    finished = _running_job(team, h100, state=JobState.SUCCEEDED)
    for hour in (8, 9):
        JobUsageHourFactory(job=idle, hour=at(3, hour), allocated_gpu_hours=4, used_gpu_hours=Decimal("0.1"),
                            utilisation_avg=0.025)
        JobUsageHourFactory(job=busy_once, hour=at(3, hour), allocated_gpu_hours=4, used_gpu_hours=0,
                            utilisation_avg=0.0 if hour == 8 else 0.05)
        JobUsageHourFactory(job=finished, hour=at(3, hour), allocated_gpu_hours=4, used_gpu_hours=0)
    JobUsageHourFactory(job=short, hour=at(3, 9), allocated_gpu_hours=4, used_gpu_hours=0)
    JobUsageHourFactory(job=idle, hour=at(3, 7), allocated_gpu_hours=4, used_gpu_hours=4, utilisation_avg=1.0)
    admin = UserFactory(is_staff=True)

    result = selectors.idle_jobs(user=admin, now=at(3, 10) + timedelta(minutes=20))

    assert [i.job for i in result] == [idle]
    assert result[0].wasted_gpu_hours == Decimal("7.8")
    assert result[0].wasted_cost == Decimal("19.50")
    assert result[0].cost_per_hour == Decimal("10.00")
    assert (result[0].window_start, result[0].window_end) == (at(3, 8), at(3, 10))
    outsider = UserFactory()
    assert selectors.idle_jobs(user=outsider, now=at(3, 10)) == []


@pytest.mark.parametrize("value", ["2026-13", "26-11", "2026/11", "", "november", "1999-01"])
def test_bad_months_are_refused_with_the_expected_shape(value):
    with pytest.raises(Exception, match="YYYY-MM"):
        selectors.parse_month(value)


@pytest.mark.parametrize("value, expected", [(None, date(2026, 3, 1)), ("", date(2026, 3, 1)),
                                             ("2026-11", date(2026, 11, 1)), ("2000-01", date(2000, 1, 1))])
def test_a_named_month_or_else_this_one(value, expected):
    assert selectors.month_or_current(value, now=datetime(2026, 3, 17, 9, tzinfo=UTC)) == expected


@pytest.mark.parametrize("value", ["2026-13", "1999-12", "3000-01", "26-11"])
def test_month_or_current_refuses_what_parse_month_refuses(value):
    with pytest.raises(ValidationError, match="YYYY-MM"):
        selectors.month_or_current(value)


def test_chart_series_come_from_rows(h100):
    team = TeamFactory()
    RateCardFactory(flavor=h100, price_per_gpu_hour=2, effective_from=START, effective_to=at(2))
    RateCardFactory(flavor=h100, price_per_gpu_hour=3, effective_from=at(2))
    UsageHourFactory(team=team, flavor=h100, hour=at(1, 5), allocated_gpu_hours=2, used_gpu_hours=1)
    UsageHourFactory(team=team, flavor=h100, hour=at(2, 5), allocated_gpu_hours=2, used_gpu_hours=1)

    assert selectors.team_daily_cost(team=team, month=NOV) == [
        {"day": date(2026, 11, 1), "cost": Decimal("4.00")}, {"day": date(2026, 11, 2), "cost": Decimal("6.00")}]
    usage = selectors.team_daily_usage(team=team, start=START, end=DEC)
    assert [(u["day"], u["flavor"], u["allocated"], u["used"]) for u in usage] == [
        (date(2026, 11, 1), "h100", Decimal(2), Decimal(1)), (date(2026, 11, 2), "h100", Decimal(2), Decimal(1))]
    cells = selectors.team_day_utilisation(user=UserFactory(is_staff=True), start=START, end=DEC)
    assert [(c["team"], c["utilisation"]) for c in cells] == [(team.slug, 0.5), (team.slug, 0.5)]


def test_another_flavors_rate_change_does_not_split_a_line(h100):
    a100 = GpuFlavorFactory(cluster=h100.cluster, name="a100")
    RateCardFactory(flavor=h100, price_per_gpu_hour=2, effective_from=START, effective_to=at(10))
    RateCardFactory(flavor=h100, price_per_gpu_hour=3, effective_from=at(10))
    RateCardFactory(flavor=a100, price_per_gpu_hour=Decimal("1.10"), effective_from=START)
    team = TeamFactory()
    for day in (2, 12, 25):
        UsageHourFactory(team=team, flavor=a100, hour=at(day), allocated_gpu_hours=1, used_gpu_hours=1)
    UsageHourFactory(team=team, flavor=h100, hour=at(12), allocated_gpu_hours=1, used_gpu_hours=0)

    lines = selectors.team_statement(team=team, month=NOV, now=AFTER_NOV).lines

    assert [(line.flavor.name, line.allocated_gpu_hours, line.cost) for line in lines] == [
        ("a100", Decimal(3), Decimal("3.30")), ("h100", Decimal(1), Decimal("3.00"))]


def test_many_teams_at_once_get_the_statements_they_get_one_by_one(h100):
    """Past 50 teams the usage and namespaces are read for everyone and the rest dropped; each rate segment is
    summed on its own (three here), and teams sharing clusters share the clusters' gaps."""
    a100, other = GpuFlavorFactory(cluster=h100.cluster, name="a100"), ClusterFactory()
    backdate(other, START - 30 * 24 * H)
    RateCardFactory(flavor=h100, price_per_gpu_hour=2, effective_from=START, effective_to=at(10))
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("2.5"), effective_from=at(10), effective_to=at(20))
    RateCardFactory(flavor=h100, price_per_gpu_hour=3, effective_from=at(20))
    RateCardFactory(flavor=a100, price_per_gpu_hour=Decimal("1.10"), effective_from=at(5))  # unpriced before
    CollectedHourFactory(cluster=h100.cluster, hour=at(3, 4), state="failed", message="timeout")
    teams = [TeamFactory() for _ in range(55)]
    for i, team in enumerate(teams):
        TeamNamespaceFactory(team=team, cluster=h100.cluster if i % 2 else other)
        for day in (1, 6, 12, 25)[:1 + i % 4]:  # some teams have nothing in the middle segment
            UsageHourFactory(team=team, flavor=a100 if i % 3 == 0 else h100, hour=at(day, i % 24),
                             allocated_gpu_hours=Decimal(i + 1) / 8, used_gpu_hours=Decimal(i) / 16)
    outsider = TeamFactory()  # not asked for: its rows are summed and dropped
    UsageHourFactory(team=outsider, flavor=h100, hour=at(2), allocated_gpu_hours=5, used_gpu_hours=1)
    now = at(3, 6)

    together = selectors.statements_for(teams=teams, month=NOV, now=now)

    assert set(together) == {t.pk for t in teams}
    for team in teams:
        alone = selectors.team_statement(team=team, month=NOV, now=now)
        both = [together[team.pk], alone]
        assert [[(line.flavor.name, line.charge_start, line.unit_price, line.allocated_gpu_hours,
                  line.used_gpu_hours, line.cost, line.idle_cost) for line in s.lines] for s in both] == [
            [(line.flavor.name, line.charge_start, line.unit_price, line.allocated_gpu_hours, line.used_gpu_hours,
              line.cost, line.idle_cost) for line in alone.lines]] * 2
        assert [[(m.cluster, m.start, m.end, m.state) for m in s.missing] for s in both] == [
            [(m.cluster, m.start, m.end, m.state) for m in alone.missing]] * 2
        assert together[team.pk].state == alone.state
    fourth = together[teams[3].pk]  # a100 (unpriced on day 1, then 1.10) on days 1, 6, 12 and 25
    assert [(line.unit_price, line.allocated_gpu_hours) for line in fourth.lines] == [
        (None, Decimal("0.5")), (Decimal("1.10"), Decimal("1.5"))]
    fifth = together[teams[4].pk]  # h100 on day 1 only: one line at 2.00
    assert [(line.unit_price, line.cost) for line in fifth.lines] == [(Decimal(2), Decimal("1.25"))]
    third, eighth = together[teams[2].pk], together[teams[7].pk]  # h100, days 1, 6, 12 (and 25 for the eighth)
    assert [(line.unit_price, line.allocated_gpu_hours) for line in third.lines] == [
        (Decimal(2), Decimal("0.75")), (Decimal("2.5"), Decimal("0.375"))]
    assert [(line.unit_price, line.allocated_gpu_hours, line.cost) for line in eighth.lines] == [
        (Decimal(2), Decimal(2), Decimal("4.00")), (Decimal("2.5"), Decimal(1), Decimal("2.50")),
        (Decimal(3), Decimal(1), Decimal("3.00"))]
    assert [m.message for m in together[teams[1].pk].missing if m.state == "failed"] == ["timeout"]
    assert [m.state for m in together[teams[0].pk].missing] == ["missing"]  # its cluster has no ledger at all


def test_the_forecast_of_a_team_whose_usage_predates_its_row_runs_from_its_first_usage(h100):
    # The demo's teams are created now over a month of backfilled usage: the forecast spread that over no hours at
    # all and equalled the cost to date.
    team = backdate(TeamFactory(), at(16, 10))
    TeamNamespaceFactory(team=team, cluster=h100.cluster)
    RateCardFactory(flavor=h100, price_per_gpu_hour=1, effective_from=START)
    _collect_month(h100.cluster)
    for hour in range(10):
        UsageHourFactory(team=team, flavor=h100, hour=at(16, hour), allocated_gpu_hours=2, used_gpu_hours=1)
    statement = selectors.team_statement(team=team, month=NOV, now=at(16, 10))
    assert statement.total_cost == Decimal("20.00")
    assert selectors.forecast(statement, now=at(16, 10)) == Decimal(2 * 15 * 24)


def test_workspaces_are_their_own_focus_rows_and_the_rows_still_add_up(h100):
    """Interactive workspaces (jobs of kind workspace) get rows of their own, x_WorkloadType "workspace", costed at
    the line's price; the jobs' rows hold the rest, so BilledCost and the GPU-hours still sum to the line's."""
    team = TeamFactory()
    RateCardFactory(flavor=h100, price_per_gpu_hour=Decimal("2.00"), effective_from=START)
    for hour in range(10):
        UsageHourFactory(team=team, flavor=h100, hour=at(5, hour), allocated_gpu_hours=8, used_gpu_hours=5)
    notebook = _running_job(team, h100, gpus=2)
    Job.objects.filter(pk=notebook.pk).update(kind="workspace")
    for hour in range(4):  # 2 GPUs for 4 hours, a quarter of an hour's work each
        JobUsageHourFactory(job=notebook, hour=at(5, hour), allocated_gpu_hours=2, used_gpu_hours=Decimal("0.5"))
    JobUsageHourFactory(job=notebook, hour=DEC, allocated_gpu_hours=2)  # another month: not counted

    statement = selectors.team_statement(team=team, month=NOV, now=AFTER_NOV)
    rows = selectors.focus_rows(statement)

    assert [(r["x_WorkloadType"], r["ConsumedQuantity"], r["x_UsedGpuHours"], r["BilledCost"], r["x_IdleCost"])
            for r in rows] == [("job", "72.000000", "48.000000", "144.00", "48.00"),
                               ("workspace", "8.000000", "2.000000", "16.00", "12.00")]
    assert sum(Decimal(r["BilledCost"]) for r in rows) == statement.total_cost == Decimal("160.00")
    assert rows[1]["ChargeDescription"].endswith("(workspaces)") and rows[1]["x_Efficiency"] == "0.2500"
    document = selectors.statement_json(statement)
    assert [(p["workload"], p["cost"]) for p in document["lines"][0]["by_workload"]] == [("job", "144.00"),
                                                                                          ("workspace", "16.00")]
