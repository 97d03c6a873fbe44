"""The window arithmetic of GPU-hour allowances (billing/allowances.py), against figures worked by hand."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from billing.allowances import AllowanceUse, WindowUse, hour_share, window, window_use
from billing.pricing import PricePeriod

H100, MIG = 1, 2
NOW = datetime(2026, 11, 20, 10, 30, tzinfo=UTC)


def at(day: int, hour: int) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def test_a_rolling_window_ends_now_and_starts_the_days_before():
    assert window(NOW, 7) == (datetime(2026, 11, 13, 10, 30, tzinfo=UTC), NOW)
    assert window(NOW, 30) == (datetime(2026, 10, 21, 10, 30, tzinfo=UTC), NOW)


def test_the_hour_a_window_starts_or_ends_in_counts_for_its_part_inside():
    start, end = window(NOW, 7)
    assert hour_share(at(13, 10), start, end) == Fraction(1, 2)  # 10:30-11:00 of 10:00-11:00
    assert hour_share(at(13, 9), start, end) == 0  # before the window
    assert hour_share(at(13, 11), start, end) == 1
    assert hour_share(at(20, 10), start, end) == Fraction(1, 2)  # the hour now is in, up to now
    assert hour_share(at(20, 11), start, end) == 0
    assert hour_share(at(1, 5), at(1, 5) + timedelta(minutes=40), at(2, 0)) == Fraction(1, 3)


def test_usage_over_a_window_with_a_price_change_inside_it():
    """Hours: 13th 09:00 (outside), 13th 10:00 (half in), 13th 11:00, 20th 09:00, 20th 10:00 (half in, up to now).
    The price is 2.00 until the 16th, 3.00 from then.
    Unit-hours: 4/2 + 4 + 8 + 6/2 = 17. Cost: (2 + 4) × 2.00 + (8 + 3) × 3.00 = 12 + 33 = 45.00."""
    start, end = window(NOW, 7)
    rows = [(at(13, 9), H100, Decimal(5)), (at(13, 10), H100, Decimal(4)), (at(13, 11), H100, Decimal(4)),
            (at(20, 9), H100, Decimal(8)), (at(20, 10), H100, Decimal(6))]
    periods = [PricePeriod(H100, at(1, 0), at(16, 0), Decimal("2.00"), "USD"),
               PricePeriod(H100, at(16, 0), at(30, 0), Decimal("3.00"), "USD")]
    use = window_use(rows, start=start, end=end, fractions={H100: Fraction(1)}, periods=periods)
    assert use == {H100: WindowUse(unit_hours=Decimal("17.000000"), gpu_hours=Decimal("17.000000"),
                                   cost=Decimal("45.00"))}


def test_a_mig_slice_counts_its_fraction_of_a_gpu_and_its_share_of_the_price():
    """A 1g.10gb slice is 1/7 of an H100: 14 slice-hours are 2 GPU-hours; priced at the parent's 7.00 × 1/7 =
    1.00 a slice-hour (as `price_periods` derives it), they cost 14.00. A partial first hour (20 of 60 minutes)
    of 3 slice-hours adds 1 slice-hour, 1/7 GPU-hour, 1.00."""
    start, end = at(10, 0) + timedelta(minutes=40), at(12, 0)
    slice_price = Decimal(7) * 1 / 7
    rows = [(at(10, 0), MIG, Decimal(3)), (at(11, 0), MIG, Decimal(14))]
    use = window_use(rows, start=start, end=end, fractions={MIG: Fraction(1, 7)},
                     periods=[PricePeriod(MIG, at(1, 0), at(30, 0), slice_price, "USD", parent="h100")])
    assert use[MIG] == WindowUse(unit_hours=Decimal("15.000000"), gpu_hours=Decimal("2.142857"),
                                 cost=Decimal("15.00"))


def test_unpriced_hours_are_counted_but_cost_nothing():
    start, end = at(10, 0), at(12, 0)
    use = window_use([(at(10, 0), H100, Decimal(2)), (at(11, 0), H100, Decimal(2))], start=start, end=end,
                     fractions={H100: Fraction(1)},
                     periods=[PricePeriod(H100, at(10, 0), at(11, 0), Decimal("1.50"), "USD")])
    assert use[H100] == WindowUse(Decimal("4.000000"), Decimal("4.000000"), Decimal("3.00"), unpriced_hours=1)


class _Allowance:
    gpu_hours = Decimal("16")


def test_an_allowance_is_spent_at_its_limit_and_overrides_raise_it():
    used = WindowUse(Decimal(17), Decimal(17), Decimal(0))
    standing = AllowanceUse(allowance=_Allowance(), start=at(13, 10), end=NOW, used=used)
    assert (standing.limit, standing.spent, standing.over_by, standing.percent) == (
        Decimal(16), True, Decimal(1), Decimal("106.3"))
    raised = AllowanceUse(allowance=_Allowance(), start=at(13, 10), end=NOW, used=used, extra_gpu_hours=Decimal(2))
    assert (raised.limit, raised.spent, raised.over_by) == (Decimal(18), False, Decimal(0))
