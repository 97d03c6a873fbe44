"""GPU-hour allowances over a rolling window: which hours a window covers, the GPU-hours and cost a team's usage
comes to in it, and whether the team is past its allowance.

The arithmetic is pure (`window`, `hour_share`, `window_use`): hourly usage rows in, figures out, no database and
no clock, so tests check it against hand-computed numbers. It counts as billing does elsewhere: usage is kept per
hour in the flavor's units (a GPU, a MIG slice), GPU-hours are unit-hours × the flavor's fraction of a GPU (as the
quota evidence counts them), and each hour is priced at the rate period it falls in (`pricing.price_periods`, the
periods statements use), so a price change mid-window prices each side at its own rate.

A rolling window ends now and starts `days` before; usage is collected per whole hour, so the hour the window
starts in counts only for the part of it inside the window.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from .pricing import GPU_HOURS_PLACES, HOUR, ZERO, PricePeriod, money


def window(now: datetime, days: int) -> tuple[datetime, datetime]:
    """The rolling window [now − days, now)."""
    return now - timedelta(days=days), now


def hour_share(hour: datetime, start: datetime, end: datetime) -> Fraction:
    """The part of the hour [hour, hour + 1 h) inside [start, end), exactly (0 to 1)."""
    inside = min(hour + HOUR, end) - max(hour, start)
    return max(Fraction(0), Fraction(int(inside.total_seconds()), 3600))


def _price(periods: list[PricePeriod], flavor_id: int, hour: datetime) -> Decimal | None:
    return next((p.price for p in periods if p.flavor_id == flavor_id and p.start <= hour < p.end), None)


@dataclass(frozen=True)
class WindowUse:
    unit_hours: Decimal
    gpu_hours: Decimal
    cost: Decimal
    unpriced_hours: int = 0  # hours with usage that no rate card covers (they cost nothing here)


def window_use(rows: Iterable[tuple[datetime, int, Decimal]], *, start: datetime, end: datetime,
               fractions: dict[int, Fraction], periods: list[PricePeriod]) -> dict[int, WindowUse]:
    """Per flavor id, what hourly `rows` (hour, flavor id, allocated unit-hours) come to inside [start, end):
    unit-hours, GPU-hours (× the flavor's fraction) and cost (each hour at its period's price), with the hour
    the window starts in counted for its part inside."""
    units: dict[int, Fraction] = defaultdict(Fraction)
    cost: dict[int, Fraction] = defaultdict(Fraction)
    unpriced: dict[int, int] = defaultdict(int)
    for hour, flavor_id, unit_hours in rows:
        share = hour_share(hour, start, end)
        if not share:
            continue
        counted = Fraction(unit_hours) * share
        units[flavor_id] += counted
        price = _price(periods, flavor_id, hour)
        if price is None:
            unpriced[flavor_id] += 1
        else:
            cost[flavor_id] += counted * Fraction(price)
    return {flavor_id: WindowUse(
        unit_hours=_places(value), gpu_hours=_places(value * fractions.get(flavor_id, Fraction(1))),
        cost=money(Decimal(cost[flavor_id].numerator) / Decimal(cost[flavor_id].denominator)),
        unpriced_hours=unpriced[flavor_id]) for flavor_id, value in units.items()}


def _places(value: Fraction) -> Decimal:
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(GPU_HOURS_PLACES)


@dataclass(frozen=True)
class AllowanceUse:
    """One allowance and where the team stands against it now."""

    allowance: object  # billing.models.Allowance
    start: datetime
    end: datetime
    used: WindowUse
    extra_gpu_hours: Decimal = ZERO  # granted by overrides in force

    @property
    def limit(self) -> Decimal:
        return Decimal(self.allowance.gpu_hours) + self.extra_gpu_hours

    @property
    def over_by(self) -> Decimal:
        return max(ZERO, self.used.gpu_hours - self.limit)

    @property
    def spent(self) -> bool:
        return self.used.gpu_hours >= self.limit

    @property
    def percent(self) -> Decimal:
        return (100 * self.used.gpu_hours / self.limit).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)

