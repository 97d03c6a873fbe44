"""Reads for cluster capacity: the GPU units the exporters reported per flavor, split into what running pods held
and the unallocated rest, priced at the flavor's rate (a cluster's idle cost, beside the teams' statements).

Rows come from `CapacityHour` (written by the collection); allocated + unallocated = capacity holds on every row,
and so on every sum here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from tenants.models import GpuFlavor

from .models import CapacityHour, UsageHour
from .pricing import UNPRICED, ZERO, money, month_bounds, price_periods, usage_sums
from .statements import _gpu_hours

CAPACITY_SUMS = {"capacity": "capacity_gpu_hours", "allocated": "allocated_gpu_hours",
                 "unallocated": "unallocated_gpu_hours"}


@dataclass
class CapacityLine:
    """One flavor of one cluster over one rate period of the month."""

    flavor: GpuFlavor
    capacity_gpu_hours: Decimal
    allocated_gpu_hours: Decimal
    unallocated_gpu_hours: Decimal
    unit_price: Decimal | None
    unallocated_cost: Decimal  # ZERO when unpriced: see `priced`

    @property
    def priced(self) -> bool:
        return self.unit_price is not None

    @property
    def allocation(self) -> Decimal | None:
        if not self.capacity_gpu_hours:
            return None
        return (self.allocated_gpu_hours / self.capacity_gpu_hours).quantize(Decimal("0.0001"))


@dataclass
class ClusterCapacity:
    cluster: str
    lines: list[CapacityLine]

    def _sum(self, attr: str) -> Decimal:
        return sum((getattr(line, attr) for line in self.lines), ZERO)

    @property
    def capacity_gpu_hours(self) -> Decimal:
        return self._sum("capacity_gpu_hours")

    @property
    def allocated_gpu_hours(self) -> Decimal:
        return self._sum("allocated_gpu_hours")

    @property
    def unallocated_gpu_hours(self) -> Decimal:
        return self._sum("unallocated_gpu_hours")

    @property
    def unallocated_cost(self) -> Decimal:
        return self._sum("unallocated_cost")

    @property
    def unpriced_gpu_hours(self) -> Decimal:
        return sum((line.unallocated_gpu_hours for line in self.lines if not line.priced), ZERO)


def cluster_capacity(*, month: date) -> list[ClusterCapacity]:
    """Each cluster's capacity in the month, per flavor and rate period, from one aggregate query."""
    start, end = month_bounds(month)
    flavors = {f.pk: f for f in GpuFlavor.objects.select_related("cluster").order_by("pk")}
    periods = price_periods(start=start, end=end, flavors=list(flavors.values()))
    clusters: dict[str, list[CapacityLine]] = {}
    for sums in usage_sums(CapacityHour.objects.all(), by=("flavor_id",), start=start, end=end, periods=periods,
                           fields=CAPACITY_SUMS):
        flavor = flavors[sums["flavor_id"]]
        price = periods[sums["period"]].price if sums["period"] != UNPRICED else None
        unallocated = _gpu_hours(sums["unallocated"])
        clusters.setdefault(flavor.cluster.name, []).append(CapacityLine(
            flavor=flavor, capacity_gpu_hours=_gpu_hours(sums["capacity"]),
            allocated_gpu_hours=_gpu_hours(sums["allocated"]), unallocated_gpu_hours=unallocated, unit_price=price,
            unallocated_cost=money(unallocated * price) if price is not None else ZERO))
    return [ClusterCapacity(cluster=name, lines=sorted(lines, key=lambda line: line.flavor.name))
            for name, lines in sorted(clusters.items())]


def unpriced_gpu_hours_by_flavor(*, month: date) -> dict[int, Decimal]:
    """Allocated GPU-hours of the month that no rate card (nor a parent GPU's) priced, per flavor: they are billed
    at nothing, so the rate cards page shows them."""
    start, end = month_bounds(month)
    periods = price_periods(start=start, end=end)
    unpriced: dict[int, Decimal] = {}
    for sums in usage_sums(UsageHour.objects.all(), by=("flavor_id",), start=start, end=end, periods=periods):
        if sums["period"] == UNPRICED and sums["allocated"]:
            unpriced[sums["flavor_id"]] = unpriced.get(sums["flavor_id"], ZERO) + _gpu_hours(sums["allocated"])
    return unpriced
