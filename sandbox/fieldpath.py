"""The field bookkeeping of server-side apply, after sigs.k8s.io/structured-merge-diff v4.6.0 (the version
Kubernetes vendors): which fields an apply configuration sets, merging it into the live object, removing what
a manager stopped applying, and `managedFields`' FieldsV1 encoding.

Maps are granular unless their schema says `x-kubernetes-map-type: atomic`. Lists are atomic unless their schema
says otherwise (`x-kubernetes-list-type`): a `map` list (`x-kubernetes-list-map-keys`; built-ins publish the same
for containers by name, ports by containerPort+protocol, env by name...) is owned item by item, each item a path
element `k:{"name":"a"}` with its fields beneath; a `set` list of scalars item by item as `v:"a"`
(fieldpath/element.go). A path is a tuple of field names and such item elements (no field name of a Kubernetes
object contains a colon).
"""

from __future__ import annotations

import copy
import json

Path = tuple[str, ...]
MISSING = object()

_SERVER_METADATA = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName"}


# --- schema -------------------------------------------------------------------------------------------------------


def resolved(schema):
    """The schema node itself, or the one it wraps (`allOf: [<definition>]` beside a default or description)."""
    if not isinstance(schema, dict):
        return None
    if "properties" in schema or "items" in schema or "additionalProperties" in schema:
        return schema
    for keyword in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(keyword) or ():
            if isinstance(sub, dict) and ("properties" in sub or "items" in sub or "additionalProperties" in sub):
                return sub
    return schema


def field_schema(schema, key: str):
    schema = resolved(schema)
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties") or {}
    if key in properties:
        return properties[key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def list_kind(schema) -> tuple[str, list[str]]:
    """("map", keys), ("set", []) or ("atomic", []): a built-in's OpenAPI or a CRD's structural schema (as
    converted for validation: `x-list-map-keys`, `uniqueItems` for a set)."""
    if not isinstance(schema, dict):
        return "atomic", []
    declared = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") if declared == "map" else schema.get("x-list-map-keys")
    if keys:
        return "map", list(keys)
    if declared == "set" or (declared is None and schema.get("uniqueItems") is True):
        return "set", []
    return "atomic", []


def is_atomic_map(schema) -> bool:
    """A map or struct owned as a whole (`x-kubernetes-map-type: atomic`: label selectors, a RoleBinding's roleRef,
    a pod's nodeSelector...)."""
    return any(isinstance(node, dict) and node.get("x-kubernetes-map-type") == "atomic"
               for node in (schema, resolved(schema)))


def items_schema(schema):
    schema = resolved(schema)
    return schema.get("items") if isinstance(schema, dict) else None


# A key field's default where the schema at hand does not declare it: k8s.io/api core/v1 types.go marks every
# port's `protocol` `+default="TCP"`.
_KEY_DEFAULTS = {"protocol": "TCP"}


# --- path elements ------------------------------------------------------------------------------------------------


def is_item(part: str) -> bool:
    return part.startswith(("k:", "v:"))


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def item_element(item, kind: str, keys: list[str], items_schema=None) -> str:
    """`k:{"containerPort":80,"protocol":"TCP"}` (keys sorted by name) or `v:"a"`. A key field left out takes the
    default its schema declares (a port's protocol is TCP)."""
    if kind == "set":
        return "v:" + _json(item)
    values = {}
    for key in keys:
        value = item.get(key, MISSING) if isinstance(item, dict) else MISSING
        if value is MISSING:
            value = (field_schema(items_schema, key) or {}).get("default", _KEY_DEFAULTS.get(key))
        values[key] = value
    return "k:" + _json(values)


def _matches(item, part: str) -> bool:
    if part.startswith("v:"):
        return item == json.loads(part[2:])
    wanted = json.loads(part[2:])
    return isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items())


def describe(path: Path) -> str:
    """A path as the API server prints it in a conflict (fieldpath.Path.String): `.spec.containers[name="a"].image`."""
    out = []
    for part in path:
        if part.startswith("k:"):
            fields = json.loads(part[2:])
            out.append("[" + ",".join(f"{k}={_json(v)}" for k, v in fields.items()) + "]")
        elif part.startswith("v:"):
            out.append(f"[={part[2:]}]")
        else:
            out.append("." + part)
    return "".join(out)


# --- field sets ---------------------------------------------------------------------------------------------------


def leaf_paths(value, schema=None, prefix: Path = ()) -> set[Path]:
    """Every field a value sets: leaves of maps, whole atomic maps and lists, and per item (the item itself and its
    fields) of map and set lists; a null or empty map is set as a leaf, the entries of a map (not the fields of a
    struct) are set themselves beside what they hold, and an empty granular list sets nothing."""
    if isinstance(value, dict) and not is_atomic_map(schema):
        paths: set[Path] = set()
        node = resolved(schema)
        declared = (node.get("properties") or {}) if isinstance(node, dict) else {}
        for key, child in value.items():
            paths |= leaf_paths(child, field_schema(schema, key), (*prefix, key))
            if child is None or child == {} or key not in declared:
                paths.add((*prefix, key))  # typed/tofieldset.go visitMapItems: a null or empty map, or a map entry
        return paths
    if isinstance(value, list) and prefix:
        kind, keys = list_kind(resolved(schema))
        if kind != "atomic":
            items = items_schema(schema)
            paths = set()
            for item in value:
                element = (*prefix, item_element(item, kind, keys, items))
                paths.add(element)
                if kind == "map":
                    paths |= leaf_paths(item, items, element)
            return paths
    return {prefix} if prefix else set()


def applied_fields(applied: dict, status_only: bool, schema=None) -> set[Path]:
    """The fields an apply configuration sets (identity and server-set metadata excluded)."""
    paths: set[Path] = set()
    for key, value in applied.items():
        if key in ("apiVersion", "kind") or (key == "status") != status_only:
            continue
        if key == "metadata":
            meta = {k: v for k, v in (value or {}).items() if k not in _SERVER_METADATA}
            if meta:
                paths |= leaf_paths(meta, field_schema(schema, "metadata"), ("metadata",))
        else:
            paths |= leaf_paths(value, field_schema(schema, key), (key,))
            if value is None or value == {}:
                paths.add((key,))
    return paths


def get_path(obj, path: Path):
    node = obj
    for part in path:
        if is_item(part):
            if not isinstance(node, list):
                return MISSING
            node = next((item for item in node if _matches(item, part)), MISSING)
            if node is MISSING:
                return MISSING
        elif not isinstance(node, dict) or part not in node:
            return MISSING
        else:
            node = node[part]
    return node


def overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def is_item_marker(path: Path) -> bool:
    """The path names a list item itself (its membership), not a value: such paths never conflict."""
    return bool(path) and is_item(path[-1])


# --- merging and removing -----------------------------------------------------------------------------------------


def deep_merge(live, applied, schema=None):
    """Apply configuration over the live object: maps merge, map and set lists merge item by item (in
    structured-merge-diff's order, typed/merge.go visitListItems), other lists and scalars replace."""
    if isinstance(applied, list) and isinstance(live, list):
        kind, keys = list_kind(resolved(schema))
        if kind != "atomic":
            return _merge_items(live, applied, kind, keys, items_schema(schema))
    if not isinstance(applied, dict) or not isinstance(live, dict) or is_atomic_map(schema):
        return copy.deepcopy(applied)
    result = dict(live)
    for key, value in applied.items():
        result[key] = deep_merge(live.get(key), value, field_schema(schema, key))
    return result


def _merge_items(live: list, applied: list, kind: str, keys: list[str], items) -> list:
    """Items of both in the applied order, items only live kept where they stood."""
    left = [item_element(i, kind, keys, items) for i in live]
    right = [item_element(i, kind, keys, items) for i in applied]
    left_items, right_items = dict(zip(left, live, strict=True)), dict(zip(right, applied, strict=True))
    shared = [e for e in right if e in left_items]
    next_shared = shared.pop(0) if shared else None
    merged: set[str] = set()
    out = []

    def both(element):
        return deep_merge(left_items.get(element), right_items[element], items)

    li = ri = 0
    while li < len(left) or ri < len(right):
        if li < len(left) and ri < len(right):
            element = left[li]
            if element == right[ri]:
                merged.add(element)
                out.append(both(element))
                li, ri = li + 1, ri + 1
                next_shared = shared.pop(0) if shared else None
                continue
            if element in right_items and next_shared is not None and next_shared != element:
                li += 1
                continue
        if li < len(left):
            element = left[li]
            if element not in right_items:
                out.append(live[li])
                li += 1
                continue
            if element in merged:
                li += 1
        if ri < len(right):
            element = right[ri]
            merged.add(element)
            out.append(both(element))
            ri += 1
            if next_shared == element:
                next_shared = shared.pop(0) if shared else None
    return out


def remove_path(obj: dict, path: Path, schema=None) -> None:
    """Remove a field or a list item, and any map or list that this removal left empty. A key field of an item
    that stays is kept (the item's own path decides whether the item goes)."""
    chain, node, node_schema = [obj], obj, schema
    for part in path[:-1]:
        node_schema = field_schema(node_schema, part) if not is_item(part) else items_schema(node_schema)
        if is_item(part):
            node = next((item for item in node if _matches(item, part)), None) if isinstance(node, list) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, (dict, list)):
            return
        chain.append(node)
    last, parent = path[-1], chain[-1]
    if is_item(last):
        if isinstance(parent, list):
            parent[:] = [item for item in parent if not _matches(item, last)]
    elif isinstance(parent, dict):
        if len(path) > 1 and path[-2].startswith("k:") and last in json.loads(path[-2][2:]):
            return
        parent.pop(last, None)
    for depth in range(len(chain) - 1, 0, -1):
        if chain[depth]:
            break
        container, part = chain[depth - 1], path[depth - 1]
        if is_item(part):
            container[:] = [item for item in container if item is not chain[depth]]
        else:
            container.pop(part, None)


def fields_v1(paths: set[Path]) -> dict:
    """FieldsV1: `f:<name>` per field, `k:{...}`/`v:...` per list item, `.` for a member of the set that also has
    members beneath it (a list item, or a map an update added)."""
    tree: dict = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(part if is_item(part) else f"f:{part}", {})
    for path in paths:
        node = tree
        for part in path:
            node = node[part if is_item(part) else f"f:{part}"]
        if node and "." not in node:
            node["."] = {}
    return tree


def paths_from_fields_v1(tree: dict, prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, child in tree.items():
        if key == ".":
            paths.add(prefix)
            continue
        if key.startswith("f:"):
            path = (*prefix, key[2:])
        elif key.startswith(("k:", "v:")):
            path = (*prefix, key)
        else:
            continue
        paths |= paths_from_fields_v1(child, path) if child else {path}
    return paths
