"""Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`), parsed with the apimachinery grammar
(kubernetes/apimachinery pkg/api/resource/quantity.go and suffix.go).

Not `kubernetes.utils.parse_quantity`: it takes what the API server refuses (`1K`, `inf`, `NaN`, ` 1`, `1_000`,
`True`) and says so in other words than the API server's, and importing it loads the whole generated client
(over a second of CPU for every sandbox process). Where both accept a quantity they agree on its value (tested).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# <quantity> ::= <signedNumber><suffix>; <suffix> ::= <binarySI> | <decimalExponent> | <decimalSI>
_QUANTITY_RE = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+|)$"
)
_MULTIPLIERS = {
    "": Decimal(1), "n": Decimal(10) ** -9, "u": Decimal(10) ** -6, "m": Decimal("0.001"),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}

QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def parse_quantity(value) -> Decimal:
    """The quantity's value as a Decimal; ValueError when it is not a valid Kubernetes quantity."""
    if isinstance(value, bool):
        raise ValueError(QUANTITY_ERROR)
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise ValueError(QUANTITY_ERROR)
    m = _QUANTITY_RE.match(value)
    if not m:
        raise ValueError(QUANTITY_ERROR)
    suffix = m.group("suffix")
    try:
        number = Decimal(m.group("number"))
        if suffix[:1] in ("e", "E"):
            return number.scaleb(int(suffix[1:]))
    except InvalidOperation:
        raise ValueError(QUANTITY_ERROR) from None
    return number * _MULTIPLIERS[suffix]


_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical(value) -> str:
    """What Quantity.String() answers for `value` (quantity.go CanonicalizeBytes): the written suffix family kept
    (binary, decimal or exponent), the largest unit with an integral amount, nothing finer than nano (rounded up);
    a binary amount below 1024 or not integral is written decimal. ValueError as `parse_quantity`."""
    amount = parse_quantity(value)
    match = _QUANTITY_RE.match(value) if isinstance(value, str) else None
    suffix = match.group("suffix") if match else ""
    if suffix in _BINARY[1:] and abs(amount) >= 1024 and amount == amount.to_integral_value():
        number, unit = int(amount), 0
        while number % 1024 == 0 and unit < len(_BINARY) - 1:
            number, unit = number // 1024, unit + 1
        return f"{number}{_BINARY[unit]}"
    if amount == 0:
        return "0"
    nanos = amount.scaleb(9)
    mantissa = int(nanos.to_integral_value(rounding="ROUND_UP"))
    exponent = -9
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa, exponent = mantissa // 1000, exponent + 3
    if suffix[:1] in ("e", "E"):
        return f"{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{mantissa}{_DECIMAL[exponent]}"
