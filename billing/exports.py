"""A statement as FinOps FOCUS CSV rows or as JSON, for `billing_statement`, the pages and the API."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from .pricing import money, unit_price
from .statements import SignalSpan, Statement

# --- exports -------------------------------------------------------------------------------------------------

# Column names after the FinOps FOCUS specification; portal-specific columns carry its `x_` prefix.
FOCUS_COLUMNS = [
    "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
    "ChargeDescription", "SubAccountId", "SubAccountName", "RegionName", "ResourceId", "ResourceName",
    "ResourceType", "SkuId", "ConsumedQuantity", "ConsumedUnit", "PricingQuantity", "PricingUnit", "ListUnitPrice",
    "BilledCost", "EffectiveCost", "BillingCurrency", "Tags", "x_CostCenter", "x_Department", "x_UsedGpuHours",
    "x_Efficiency", "x_IdleCost", "x_PriceFrom", "x_StatementState", "x_UnpricedGpuHours", "x_UtilisationSignal",
    "x_WorkloadType",
]
# What held the GPU-hours of a row: batch jobs (and any other labelled pods), or interactive workspaces.
JOBS, WORKSPACES = "job", "workspace"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Part:
    """One workload type's share of a statement line."""

    workload: str
    allocated: Decimal
    used: Decimal
    cost: Decimal
    idle_cost: Decimal


def line_parts(line) -> list[Part]:
    """The line as job and workspace rows; the workspaces' cost is their GPU-hours at the line's price, the jobs'
    the rest, so the rows add up to the line exactly."""
    if not line.workspace_gpu_hours:
        return [Part(JOBS, line.allocated_gpu_hours, line.used_gpu_hours, line.cost, line.idle_cost)]
    price = line.unit_price or Decimal(0)
    cost = money(line.workspace_gpu_hours * price) if line.priced else Decimal(0)
    idle = cost - money(line.workspace_used_gpu_hours * price) if line.priced else Decimal(0)
    workspaces = Part(WORKSPACES, line.workspace_gpu_hours, line.workspace_used_gpu_hours, cost, idle)
    jobs = Part(JOBS, line.allocated_gpu_hours - workspaces.allocated, line.used_gpu_hours - workspaces.used,
                line.cost - cost, line.idle_cost - idle)
    return [part for part in (jobs, workspaces) if part.allocated]


def focus_rows(statement: Statement) -> list[dict]:
    """One row per statement line (a flavor over one rate period) and workload type; BilledCost of the rows sums to
    the total."""
    team = statement.team
    department = team.parent.name if team.parent_id else ""
    rows = []
    for line, part in ((each, part) for each in statement.lines for part in line_parts(each)):
        flavor = line.flavor
        rows.append({
            "BillingPeriodStart": _iso(statement.start), "BillingPeriodEnd": _iso(statement.end),
            "ChargePeriodStart": _iso(line.charge_start), "ChargePeriodEnd": _iso(line.charge_end),
            "ChargeCategory": "Usage",
            "ChargeDescription": f"{flavor.name} GPU allocation in {flavor.cluster.name}"
                                 + (" (workspaces)" if part.workload == WORKSPACES else ""),
            "SubAccountId": team.slug, "SubAccountName": team.name, "RegionName": flavor.cluster.name,
            "ResourceId": f"{flavor.cluster.name}/{team.namespace}/{flavor.name}", "ResourceName": flavor.name,
            "ResourceType": "GPU", "SkuId": flavor.resource_name,
            "ConsumedQuantity": str(part.allocated), "ConsumedUnit": "GPU-Hours",
            "PricingQuantity": str(part.allocated), "PricingUnit": "GPU-Hours",
            "ListUnitPrice": "" if line.unit_price is None else str(unit_price(line.unit_price)),
            "BilledCost": str(part.cost), "EffectiveCost": str(part.cost), "BillingCurrency": line.currency,
            "Tags": json.dumps({"cost-center": team.cost_center, "department": department}, sort_keys=True),
            "x_CostCenter": team.cost_center, "x_Department": department,
            "x_UsedGpuHours": str(part.used),
            "x_Efficiency": str((part.used / part.allocated).quantize(Decimal("0.0001"))) if part.allocated else "",
            "x_IdleCost": str(part.idle_cost), "x_PriceFrom": line.price_from, "x_StatementState": statement.state,
            # No rate card covered these hours: BilledCost 0 means "not priced", not "free".
            "x_UnpricedGpuHours": "0" if line.priced else str(part.allocated),
            # The dcgm-exporter field x_UsedGpuHours was read from; each with its hours when it changed.
            "x_UtilisationSignal": line.utilisation_signal,
            "x_WorkloadType": part.workload,
        })
    return rows


def _spans(spans: list[SignalSpan]) -> list[dict]:
    return [{"signal": span.signal, "label": span.label, "time_based": span.time_based, "start": _iso(span.start),
             "end": _iso(span.end)} for span in spans]


def statement_json(statement: Statement) -> dict:
    team = statement.team
    return {
        "team": team.slug, "team_name": team.name, "cost_center": team.cost_center,
        "department": team.parent.name if team.parent_id else None,
        "month": f"{statement.month:%Y-%m}", "state": statement.state, "currency": statement.currency,
        "billing_period": {"start": _iso(statement.start), "end": _iso(statement.end)},
        "lines": [{
            "cluster": line.flavor.cluster.name, "flavor": line.flavor.name, "resource": line.flavor.resource_name,
            "charge_period": {"start": _iso(line.charge_start), "end": _iso(line.charge_end)},
            "unit_price": None if line.unit_price is None else str(unit_price(line.unit_price)),
            "price_from": line.price_from, "priced": line.priced,
            "allocated_gpu_hours": str(line.allocated_gpu_hours), "used_gpu_hours": str(line.used_gpu_hours),
            "efficiency": None if line.efficiency is None else str(line.efficiency),
            "cost": str(line.cost), "idle_cost": str(line.idle_cost),
            "utilisation_signal": line.utilisation_signal, "utilisation_signals": _spans(line.signals),
            "by_workload": [{"workload": part.workload, "allocated_gpu_hours": str(part.allocated),
                             "used_gpu_hours": str(part.used), "cost": str(part.cost),
                             "idle_cost": str(part.idle_cost)} for part in line_parts(line)],
        } for line in statement.lines],
        "utilisation_signals": _spans(statement.signals),
        "totals": {"allocated_gpu_hours": str(statement.allocated_gpu_hours),
                   "used_gpu_hours": str(statement.used_gpu_hours), "cost": str(statement.total_cost),
                   "idle_cost": str(statement.total_idle_cost),
                   "unpriced_gpu_hours": str(statement.unpriced_gpu_hours)},
        "missing_hours": [{"cluster": m.cluster, "start": _iso(m.start), "end": _iso(m.end), "state": m.state,
                           "message": m.message, "retryable": m.retryable} for m in statement.missing],
    }


def write_focus_csv(statements: list[Statement], stream) -> None:
    writer = csv.DictWriter(stream, fieldnames=FOCUS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for statement in statements:
        writer.writerows(focus_rows(statement))
