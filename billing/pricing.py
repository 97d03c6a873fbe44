"""Money, months and hours, and prices: which rate is in force for which flavor when, and the one aggregate query
that sums usage per rate period.

Usage rows are summed by the database in one pass per call, each value into the sum of the rate segment its hour
falls in, so every hour is priced at the rate in force then. Prices multiply the period sums in Decimal, exactly.
"""

from __future__ import annotations

import calendar
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.core.exceptions import ValidationError
from django.db.models import Q, Sum
from django.utils import timezone

from portal.limits import EARLIEST_YEAR, LATEST_YEAR, year_in_range
from tenants.models import GpuFlavor

from .models import RateCard

CENT = Decimal("0.01")
GPU_HOURS_PLACES = Decimal("0.000001")
ZERO = Decimal(0)
HOUR = timedelta(hours=1)
MONTH_RE = re.compile(r"^(\d{4})-(\d{2})$")
UNPRICED = -1  # the period index of hours no rate card covers


def money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


# --- months and hours ----------------------------------------------------------------------------------------


def parse_month(value: str) -> date:
    """'2026-11' → date(2026, 11, 1); anything else is a ValidationError that says what is expected."""
    match = MONTH_RE.match((value or "").strip())
    if not match or not 1 <= int(match[2]) <= 12 or not year_in_range(int(match[1])):
        raise ValidationError(f"'{value}' is not a month: use YYYY-MM from {EARLIEST_YEAR}-01 to {LATEST_YEAR}-12, "
                              "e.g. 2026-11.")
    return date(int(match[1]), int(match[2]), 1)


def month_or_current(value: str | None, now: datetime | None = None) -> date:
    """The month named (YYYY-MM, checked by parse_month), or this month when none is named. Pages and the API
    read a requested month through here."""
    return parse_month(value) if value else current_month(now)


def current_month(now: datetime | None = None) -> date:
    now = now or timezone.now()
    return date(now.year, now.month, 1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """The month as [start, end) in UTC."""
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    days = calendar.monthrange(month.year, month.month)[1]
    return start, start + timedelta(days=days)


def floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def unit_price(price: Decimal) -> Decimal:
    """A derived price (a slice's exact share of its GPU's rate) shown to ten places; costs use the exact one."""
    return price.quantize(Decimal("0.0000000001")).normalize() if price.as_tuple().exponent < -10 else price


def hours_between(start: datetime, end: datetime) -> int:
    return max(0, int((end - start) / HOUR))


# --- rates ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PricePeriod:
    """The price of one unit-hour of a flavor over [start, end); `parent` names the flavor it derives from."""

    flavor_id: int
    start: datetime
    end: datetime
    price: Decimal
    currency: str
    parent: str = ""


def parent_flavor(flavor: GpuFlavor, cluster_flavors: list[GpuFlavor]) -> GpuFlavor | None:
    """The whole GPU a fractional flavor (a MIG slice) is cut from: a whole-GPU flavor of the same cluster with the
    same GPU model, or the cluster's only whole-GPU flavor; None when that is ambiguous or absent. Spot flavors are
    priced on their own card and never stand for the reserved GPU a slice is cut from."""
    if flavor.fraction >= 1:
        return None
    whole = [f for f in cluster_flavors if f.cluster_id == flavor.cluster_id and f.fraction >= 1
             and f.resource_name == "nvidia.com/gpu" and not f.spot]
    same_model = [f for f in whole if flavor.gpu_model and f.gpu_model == flavor.gpu_model]
    if len(same_model) == 1:
        return same_model[0]
    return whole[0] if len(whole) == 1 else None


def _subtract(start: datetime, end: datetime, taken: list[tuple[datetime, datetime]]):
    """[start, end) minus the (sorted, disjoint) taken intervals."""
    cursor = start
    for t_start, t_end in taken:
        if t_end <= cursor or t_start >= end:
            continue
        if t_start > cursor:
            yield cursor, t_start
        cursor = max(cursor, t_end)
    if cursor < end:
        yield cursor, end


def price_periods(*, start: datetime, end: datetime, flavors: list[GpuFlavor] | None = None) -> list[PricePeriod]:
    """Every priced period of [start, end), clipped to it: explicit rate cards first; a MIG slice without its own
    card for some hours gets its parent GPU's rate × its fraction for those hours."""
    flavors = list(GpuFlavor.objects.order_by("pk")) if flavors is None else flavors
    cards = RateCard.objects.filter(effective_from__lt=end).filter(
        Q(effective_to__isnull=True) | Q(effective_to__gt=start)).order_by("flavor_id", "effective_from")
    explicit = defaultdict(list)
    for card in cards:
        explicit[card.flavor_id].append(PricePeriod(
            flavor_id=card.flavor_id, start=max(card.effective_from, start),
            end=min(card.effective_to or end, end), price=card.price_per_gpu_hour, currency=card.currency))
    periods = [p for flavor in flavors for p in explicit.get(flavor.pk, [])]
    for flavor in flavors:
        parent = parent_flavor(flavor, flavors)
        if parent is None:
            continue
        taken = [(p.start, p.end) for p in explicit.get(flavor.pk, [])]
        for p in explicit.get(parent.pk, []):
            # The exact share (1/7, not 0.1429): seven 1g slices cost one GPU to the cent.
            share = flavor.fraction
            periods += [PricePeriod(flavor_id=flavor.pk, start=s, end=e,
                                    price=p.price * share.numerator / share.denominator,
                                    currency=p.currency, parent=parent.name)
                        for s, e in _subtract(p.start, p.end, taken)]
    return sorted(periods, key=lambda p: (p.flavor_id, p.start))


def rate_cards(*, flavor: GpuFlavor | None = None):
    cards = RateCard.objects.select_related("flavor__cluster")
    return (cards.filter(flavor=flavor) if flavor else cards).order_by("flavor__cluster__name", "flavor__name",
                                                                         "-effective_from")


def rate_in_force(*, flavor: GpuFlavor, at: datetime) -> PricePeriod | None:
    periods = price_periods(start=floor_hour(at), end=floor_hour(at) + HOUR,
                            flavors=list(GpuFlavor.objects.filter(cluster_id=flavor.cluster_id)))
    return next((p for p in periods if p.flavor_id == flavor.pk), None)


# --- the aggregate -------------------------------------------------------------------------------------------


def segments(*, start: datetime, end: datetime, periods: list[PricePeriod]) -> list[tuple[datetime, datetime]]:
    """[start, end) cut at every period boundary of any flavor: within one segment each flavor has one price."""
    cuts = sorted({start, end} | {p.start for p in periods} | {p.end for p in periods})
    cuts = [c for c in cuts if start <= c <= end]
    return list(zip(cuts, cuts[1:], strict=False))


USAGE_SUMS = {"allocated": "allocated_gpu_hours", "used": "used_gpu_hours"}


def usage_sums(rows, *, by: tuple[str, ...], start: datetime, end: datetime,
               periods: list[PricePeriod], fields: dict[str, str] = USAGE_SUMS,
               also: dict | None = None) -> list[dict]:
    """One aggregate query over hourly `rows`: the `fields` (allocated and used GPU-hours unless told) summed per
    `by` group and rate period. `also` names more aggregates (e.g. `Min("hour")`) taken per `by` group in the same
    query; each of the group's period rows carries them.

    The month is cut into segments at every price change; rows are grouped by `by` alone and each field is summed
    once per segment (`SUM(…) FILTER (WHERE hour in the segment)`), so the database hashes the same groups as a plain
    `SUM … GROUP BY` and adds each value once. (Grouping by a per-row segment key instead doubled the groups and
    cost a third more; grouping by a CASE over the periods made the planner guess badly and sort to disk.)
    Segments of one flavor at one price are merged here, exactly, in Decimal.
    """
    segs = segments(start=start, end=end, periods=periods)
    period_of = {}  # (flavor_id, segment) → index into periods
    for i, p in enumerate(periods):
        for k, (s_start, s_end) in enumerate(segs):
            if p.start <= s_start and s_end <= p.end:
                period_of[(p.flavor_id, k)] = i
    sums = {}
    for k, (s_start, s_end) in enumerate(segs):
        # The query's range already bounds the first segment's start and the last one's end.
        window = Q(hour__gte=s_start) if k else Q()
        window &= Q(hour__lt=s_end) if k < len(segs) - 1 else Q()
        sums.update({f"{name}_{k}": Sum(column, filter=window or None) for name, column in fields.items()})
    also = also or {}
    query = rows.filter(hour__gte=start, hour__lt=end).values(*by).annotate(**sums, **also).order_by()
    width, keys, flavor_at = len(fields), len(by), by.index("flavor_id")
    merged: dict[tuple, list] = {}  # (*group, period) → the fields' sums
    extras: dict[tuple, tuple] = {}  # group → its `also` aggregates
    for row in query.values_list(*by, *also, *sums):
        if also:
            extras[row[:keys]] = row[keys:keys + len(also)]
            row = row[:keys] + row[keys + len(also):]
        for k in range(len(segs)):
            values = row[keys + k * width:keys + (k + 1) * width]
            if values.count(None) == width:  # no rows of this group in the segment
                continue
            key = (*row[:keys], period_of.get((row[flavor_at], k), UNPRICED))
            entry = merged.get(key)
            if entry is None:
                merged[key] = [value or ZERO for value in values]
            else:
                merged[key] = [total + (value or ZERO) for total, value in zip(entry, values, strict=True)]
    return [{**dict(zip(by, key, strict=False)), "period": key[-1], **dict(zip(fields, totals, strict=True)),
             **dict(zip(also, extras.get(key[:-1], ()), strict=False))}
            for key, totals in merged.items()]


def unit_prices_now(flavors) -> dict[int, tuple[Decimal, str]]:
    """{flavor id: (price of one unit-hour, currency)} in the current hour: its rate card, or its parent GPU's
    share (what a statement would charge for an hour starting now)."""
    wanted = {f.pk for f in flavors}
    # A slice's parent GPU is found among all the flavors of its cluster.
    cluster_flavors = list(GpuFlavor.objects.filter(cluster__in={f.cluster_id for f in flavors}).order_by("pk"))
    start = timezone.now().replace(minute=0, second=0, microsecond=0)
    return {p.flavor_id: (p.price, p.currency)
            for p in price_periods(start=start, end=start + timedelta(hours=1), flavors=cluster_flavors)
            if p.flavor_id in wanted}
