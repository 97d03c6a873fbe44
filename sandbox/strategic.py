"""Strategic merge patch for built-in kinds, driven by the OpenAPI schema's `x-kubernetes-patch-strategy` and
`x-kubernetes-patch-merge-key` (what k8s.io/apimachinery pkg/util/strategicpatch reads from the Go struct tags).

Lists whose field says `merge` merge item by item on the merge key (containers by name, ports by containerPort...),
or as a set for lists of scalars; other lists and scalars replace; `null` deletes. Directives: `$patch: replace` /
`delete` (on a map or a list item), `$retainKeys`, `$setElementOrder/<field>`, `$deleteFromPrimitiveList/<field>`.
"""

from __future__ import annotations

import copy

from .fieldpath import field_schema as _field_schema
from .patch import PatchError

_ORDER, _DELETE_PRIMITIVE = "$setElementOrder/", "$deleteFromPrimitiveList/"


def _strategy(schema: dict | None) -> tuple[bool, str | None]:
    if not isinstance(schema, dict):
        return False, None
    strategy = schema.get("x-kubernetes-patch-strategy") or ""
    return "merge" in strategy.split(","), schema.get("x-kubernetes-patch-merge-key")


def merge(original, patch, schema: dict | None):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    if directive is not None:
        raise PatchError(f"Unknown patch type: {directive}")
    result = dict(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            name = key[len(_DELETE_PRIMITIVE):]
            if isinstance(result.get(name), list):
                result[name] = [item for item in result[name] if item not in (value or ())]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
            continue
        sub = _field_schema(schema, key)
        if isinstance(value, dict):
            merged = merge(result.get(key), value, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, sub)
        else:
            result[key] = copy.deepcopy(value)
    for key, order in patch.items():
        if key.startswith(_ORDER) and isinstance(result.get(key[len(_ORDER):]), list):
            name = key[len(_ORDER):]
            _, merge_key = _strategy(_field_schema(schema, name))
            result[name] = _ordered(result[name], order, merge_key)
    return result


def _merge_list(original, patch: list, schema: dict | None) -> list:
    mergeable, merge_key = _strategy(schema)
    if not mergeable or not isinstance(original, list):
        return [_strip(item) for item in patch if not (isinstance(item, dict) and item.get("$patch") == "delete")]
    items_schema = schema.get("items") if isinstance(schema, dict) else None
    if merge_key is None:  # a set of scalars
        result = list(original)
        for item in patch:
            if item not in result:
                result.append(copy.deepcopy(item))
        return result
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_strip(item) for item in patch if not (isinstance(item, dict) and item.get("$patch"))]
    result = [copy.deepcopy(item) for item in original]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {merge_key}")
        index = next((i for i, cur in enumerate(result) if isinstance(cur, dict)
                      and cur.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
            continue
        if index is None:
            result.append(_strip(item))
        else:
            result[index] = merge(result[index], item, items_schema)
    return result


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _ordered(items: list, order: list, merge_key: str | None) -> list:
    def key(item):
        return item.get(merge_key) if merge_key and isinstance(item, dict) else item

    wanted = [key(o) if isinstance(o, dict) else o for o in order]
    placed = [item for w in wanted for item in items if key(item) == w]
    return placed + [item for item in items if key(item) not in wanted]
