"""What a job would cost, said on the submit form before it is sent ("about 35 USD per hour at today's rates, 840 USD
at its runtime limit"). Prices belong to billing, a layer above: billing registers where today's unit prices come
from, and this module only multiplies."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

_price_sources: list = []


def register_unit_prices(source) -> None:
    """`source(flavors)` → {flavor id: (price of one unit-hour, currency)} for the flavors priced now."""
    _price_sources[:] = [source]


def unit_prices(flavors) -> dict[int, tuple[Decimal, str]]:
    flavors = list(flavors)
    return _price_sources[0](flavors) if flavors and _price_sources else {}


def _amount(value: Decimal) -> str:
    rounded = value.quantize(Decimal("1") if value >= 100 else Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"{rounded:,}"


def estimate_sentence(*, units: int, price: tuple[Decimal, str] | None, max_runtime_minutes: int | None) -> str:
    """The form's sentence for `units` of a flavor at `price`; empty when the flavor has no price."""
    if price is None or units <= 0:
        return ""
    unit_price, currency = price
    hourly = unit_price * units
    sentence = f"About {_amount(hourly)} {currency} per hour at today's rates"
    if max_runtime_minutes:
        sentence += f", {_amount(hourly * Decimal(max_runtime_minutes) / 60)} {currency} at its runtime limit"
    return sentence + "."
