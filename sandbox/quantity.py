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
