"""The checks kube-apiserver makes of every object beside its schema and metadata (`sandbox.object_meta`): resource
quantities (pkg/apis/core/validation: ValidateResourceRequirements and
the quantity maps), and the shape of one StatusCause."""

from __future__ import annotations

import json

from .quantity import canonical, parse_quantity


def cause(field: str, message: str, reason: str = "FieldValueInvalid") -> dict:
    return {"reason": reason, "message": message, "field": field}


def render(value) -> str:
    return json.dumps(value) if not isinstance(value, dict | list) else "object" if isinstance(value, dict) else "array"


# Quantities ----------------------------------------------------------------------------------------------------

def _is_extended_resource(name: str) -> bool:
    """Mirrors IsExtendedResourceName: a prefixed name outside kubernetes.io, not a quota "requests." name."""
    if "/" not in name or name.startswith("requests."):
        return False
    prefix = name.split("/", 1)[0]
    return not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"))


def _quantity_map_causes(values, field: str, *, non_negative: bool = True) -> list[dict]:
    if not isinstance(values, dict):
        return []
    causes = []
    for resource, value in values.items():
        path = f"{field}[{resource}]"
        try:
            amount = parse_quantity(value)
        except ValueError as exc:
            causes.append(cause(path, f"Invalid value: {render(value)}: {exc}"))
            continue
        shown = render(canonical(value))  # ValidateResourceQuantityValue shows Quantity.String()
        if non_negative and amount < 0:
            causes.append(cause(path, f"Invalid value: {shown}: must be greater than or equal to 0"))
        if _is_extended_resource(resource) and amount != amount.to_integral_value():
            causes.append(cause(path, f"Invalid value: {shown}: must be an integer"))
    return causes


def quantity_causes(obj: dict) -> list[dict]:
    """`resources.requests/limits` anywhere (pod templates nest in many kinds), quota `hard`, LimitRange limits."""
    causes: list[dict] = []

    def walk(node, path: str):
        if isinstance(node, dict):
            for key, value in node.items():
                child = f"{path}.{key}" if path else key
                if key == "resources" and isinstance(value, dict):
                    for part in ("limits", "requests"):  # ValidateResourceRequirements' order
                        causes.extend(_quantity_map_causes(value.get(part), f"{child}.{part}"))
                walk(value, child)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")

    walk(obj.get("spec"), "spec")
    kind = obj.get("kind")
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if kind == "ResourceQuota":
        causes.extend(_quantity_map_causes(spec.get("hard"), "spec.hard"))
    elif kind == "LimitRange":
        for i, limit in enumerate(spec.get("limits") or []):
            if isinstance(limit, dict):
                for part in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):  # may be negative
                    causes.extend(_quantity_map_causes(limit.get(part), f"spec.limits[{i}].{part}",
                                                       non_negative=False))
    return causes


# Schema validators ---------------------------------------------------------------------------------------------
