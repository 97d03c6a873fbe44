"""Evidence on a built month, checked against figures worked out by hand (in the comments), and its query budget."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.evidence import evidence_for, job_wait_intervals, percentile, rightsizing
from jobs.models import Job, JobWait
from quotas.models import Quota, QuotaLevel
from tests.factories import (
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    RateCardFactory,
    TeamFactory,
    UsageHourFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 6, 30, 12, 20, tzinfo=UTC)  # the window is the 720 hours before 12:00
START = datetime(2026, 5, 31, 12, tzinfo=UTC)
H = timedelta(hours=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    return START + timedelta(hours=hours)


def job(team, flavor, *, workers, per_worker, submitted, admitted=None, finished=None, state="queued", user=None):
    return Job.objects.create(team=team, cluster=flavor.cluster, flavor=flavor, kind="batch", name="train",
                              priority_tier=PriorityTierFactory(name="standard"), image="ghcr.io/acme/train:1",
                              workers=workers, gpus_per_worker=per_worker, submitted_by=user or UserFactory(),
                              submitted_at=submitted, admitted_at=admitted, finished_at=finished, state=state)


@pytest.fixture
def month():
    team = TeamFactory(slug="ml-research")
    flavor = GpuFlavorFactory(name="h100", capacity=64)
    RateCardFactory(flavor=flavor, price_per_gpu_hour=2, effective_from=EPOCH)
    Quota.objects.create(team=team, flavor=flavor, guaranteed=20, burst=4)
    QuotaLevel.objects.create(team=team, flavor=flavor, guaranteed=16, burst=4, since=EPOCH)
    QuotaLevel.objects.create(team=team, flavor=flavor, guaranteed=20, burst=4, since=at(240))  # day 10
    rows = [UsageHourFactory.build(team=team, flavor=flavor, hour=at(h), allocated_gpu_hours=16, used_gpu_hours=12)
            for h in range(600)]
    rows += [UsageHourFactory.build(team=team, flavor=flavor, hour=at(h), allocated_gpu_hours=24, used_gpu_hours=24)
             for h in range(600, 700)]
    # A partial hour: half a GPU-hour held, a quarter used. Hours 701-719 have no row: nothing held.
    rows.append(UsageHourFactory.build(team=team, flavor=flavor, hour=at(700), allocated_gpu_hours=Decimal("0.5"),
                                       used_gpu_hours=Decimal("0.25")))
    UsageHourFactory._meta.model.objects.bulk_create(rows)
    user = UserFactory()
    # A: 8 units, waited 2.5 h (from 100:30 to 103:00) with nothing recorded: quota, 20 unit-hours.
    job(team, flavor, workers=2, per_worker=4, submitted=at(100.5), admitted=at(103), state="running", user=user)
    # B: 8 units, waited 1.25 h for placement (recorded): 10 unit-hours, no quota wait.
    b = job(team, flavor, workers=1, per_worker=8, submitted=at(200), admitted=at(201.25), state="running", user=user)
    JobWait.objects.create(job=b, reason="placement", started_at=at(200), ended_at=at(201.25))
    # C: 4 units, submitted before the window, admitted 1 h into it: 4 unit-hours of quota in the window.
    job(team, flavor, workers=1, per_worker=4, submitted=at(-2), admitted=at(1), state="succeeded",
        finished=at(5), user=user)
    # D: 2 units, 2 h held for budget, then still queued until now (hour 302 → 720): 836 unit-hours of quota.
    d = job(team, flavor, workers=2, per_worker=1, submitted=at(300), user=user)
    JobWait.objects.create(job=d, reason="budget", started_at=at(300), ended_at=at(302))
    # E: ended before the window: not counted.
    job(team, flavor, workers=8, per_worker=8, submitted=at(-50), finished=at(-40), state="cancelled", user=user)
    return team, flavor


def test_the_month_by_hand(month):
    team, flavor = month
    (e,) = evidence_for([(team, flavor)], now=NOW)
    assert (e.start, e.end, len(e.hours)) == (START, START + 720 * H, 720)
    # 600 × 16 + 100 × 24 + 0.5 held; 600 × 12 + 100 × 24 + 0.25 used.
    assert e.allocated_unit_hours == Decimal("12000.5")
    assert e.used_unit_hours == Decimal("9600.25")
    assert e.idle_unit_hours == Decimal("2400.25")
    assert e.idle_share == Decimal("0.2000")  # 2400.25 / 12000.5 = 0.200012…
    assert e.idle_cost == Decimal("4800.50")  # each idle unit-hour at 2
    # Guaranteed 16 until hour 240, then 20; held 24 in hours 600-699: 4 borrowed each.
    assert e.guaranteed[239] == 16 and e.guaranteed[240] == 20
    assert e.borrowed_unit_hours == Decimal("400")
    # Sorted: 19 zeros, 0.5, 600 × 16, 100 × 24. p50 is the 360th (16), p95 the 684th (24).
    assert (e.p50_units, e.p95_units) == (16, 24)
    assert e.p95_of_guaranteed_percent == 120
    assert e.waited_unit_hours == {"quota": Decimal("860"), "placement": Decimal("10"), "budget": Decimal("4")}
    # Quota waits per hour: 4 in hour 0 (C), 4, 8, 8 in hours 100-102 (A), 2 in each of hours 302-719 (D).
    assert e.quota_waiting[0] == 4 and e.quota_waiting[100:103] == [4, 8, 8] and e.quota_waiting[302] == 2
    # One more unit leaves 3 + 3 + 7 + 7 + 418 = 438, over 20 % of 860 (172); two leave 2 + 2 + 6 + 6 = 16.
    assert e.extra_units == 2 and e.waited_after(2) == 16
    # ⌈24 × (1 − 0.2)⌉ + 2 = 20 + 2.
    assert e.recommended_guaranteed == 22
    assert e.sentence() == ("ml-research used 120 % of its 20 h100 units at p95 (24 held) and its jobs waited 860 "
                            "GPU-hours for quota; 2 more would have cut that to about 16 (and 10 GPU-hours for "
                            "placement and 4 GPU-hours for budget).")


def test_mig_slices_count_as_their_fraction_of_a_gpu():
    team = TeamFactory(slug="vision")
    flavor = GpuFlavorFactory(name="mig-1g", resource_name="nvidia.com/mig-1g.10gb", sharing="mig",
                              mig_slices_per_gpu=7, capacity=56)
    UsageHourFactory(team=team, flavor=flavor, hour=at(10), allocated_gpu_hours=Decimal("3.5"),
                     used_gpu_hours=Decimal("1.75"))
    # Seven slices waited 1 h 30 min: 10.5 slice-hours, 1.5 GPU-hours.
    job(team, flavor, workers=1, per_worker=7, submitted=at(20), admitted=at(21.5), state="running")
    (e,) = evidence_for([(team, flavor)], now=NOW)
    assert e.waited_unit_hours["quota"] == Decimal("10.5")
    assert e.gpu_hours(e.waited_unit_hours["quota"]) == Decimal("1.5")
    assert e.gpu_hours(e.allocated_unit_hours) == Decimal("0.5")
    assert e.quota_waiting[20:22] == [7, Decimal("3.5")]
    assert e.idle_cost == 0 and e.unpriced_hours == 1  # no rate card: the idle part has no price


def test_wait_pieces_from_the_timeline_and_the_recorded_reasons():
    t = START
    pieces = job_wait_intervals(submitted_at=t, admitted_at=t + 4 * H, finished_at=None, now=t + 10 * H,
                                spans=[("placement", t + H, t + 2 * H),
                                       # re-queued after an eviction, still waiting: open until now
                                       ("quota", t + 6 * H, None)])
    assert sorted(pieces) == [(t, t + H, "quota"), (t + H, t + 2 * H, "placement"), (t + 2 * H, t + 4 * H, "quota"),
                              (t + 6 * H, t + 10 * H, "quota")]


def test_percentile_is_nearest_rank():
    assert percentile([Decimal(v) for v in range(1, 21)], 95) == 19
    assert percentile([Decimal(v) for v in range(1, 21)], 50) == 10
    assert percentile([], 95) == 0


def _world(teams: int, jobs_each: int):
    flavor = GpuFlavorFactory(name="h100")
    RateCardFactory(flavor=flavor, price_per_gpu_hour=2, effective_from=EPOCH)
    pairs, user = [], UserFactory()
    for n in range(teams):
        team = TeamFactory()
        Quota.objects.create(team=team, flavor=flavor, guaranteed=4, burst=0)
        QuotaLevel.objects.create(team=team, flavor=flavor, guaranteed=4, burst=0, since=EPOCH)
        UsageHourFactory._meta.model.objects.bulk_create(
            [UsageHourFactory.build(team=team, flavor=flavor, hour=at(h), allocated_gpu_hours=4, used_gpu_hours=n % 4)
             for h in range(0, 720, 7)])
        for j in range(jobs_each):
            created = job(team, flavor, workers=1, per_worker=2, submitted=at(j * 3), admitted=at(j * 3 + 1),
                          state="running", user=user)
            JobWait.objects.create(job=created, reason="placement", started_at=at(j * 3), ended_at=at(j * 3 + 0.5))
        pairs.append((team, flavor))
    return pairs


def test_the_queries_do_not_grow_with_the_data():
    small = _world(1, 1)
    with CaptureQueriesContext(connection) as few:
        evidence_for(small, now=NOW)
    large = _world(6, 12)
    with CaptureQueriesContext(connection) as many:
        result = evidence_for(large, now=NOW)
    assert len(result) == 6 and all(e.waited_unit_hours["placement"] == 12 for e in result)
    assert len(many) == len(few) <= 7


def test_rightsizing_scopes_rows_and_puts_the_largest_changes_first(month):
    team, flavor = month
    idle = TeamFactory(slug="idle-team")
    Quota.objects.create(team=idle, flavor=flavor, guaranteed=30, burst=0)
    QuotaLevel.objects.create(team=idle, flavor=flavor, guaranteed=30, burst=0, since=EPOCH)
    rows = rightsizing(user=PlatformAdminFactory(), now=NOW)
    assert [(r.evidence.team.slug, r.recommended, r.delta, r.verdict) for r in rows] == [
        ("idle-team", 0, -30, "over-provisioned"), ("ml-research", 22, 2, "under-provisioned")]
    assert rows[0].monthly_cost_change == Decimal("-43800.00")  # 30 units × 730 h × 2
    assert rows[1].monthly_cost_change == Decimal("2920.00")
    admin = MembershipFactory(team=team, role="admin").user
    assert [r.evidence.team.slug for r in rightsizing(user=admin, now=NOW)] == ["ml-research"]
    member = MembershipFactory(team=team, role="member").user
    assert rightsizing(user=member, now=NOW) == []
