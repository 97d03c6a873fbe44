"""Field ownership of the writes that are not server-side apply (create, update, merge/JSON/strategic patch): the
`Update` entry of metadata.managedFields, as kube-apiserver's field manager keeps it.

After sigs.k8s.io/structured-merge-diff (typed/compare.go, merge/update.go Updater.Update) and
k8s.io/apimachinery pkg/util/managedfields/internal (stripmeta.go, managedfields.go): the writer owns every
field the write added or changed, compared with the object before it (on create, the kind's empty object: for a
built-in kind what its Go type holds when empty, for a custom kind nothing); a map or list the write added is
itself a member of the set (`.` in FieldsV1) beside its fields. Other managers lose what this write changed or
removed; a manager left owning nothing is dropped. The object's identity and server-set metadata are never owned,
nor is `status` through the main resource of a kind with a status subresource (its reset fields). The manager of a
request without `fieldManager` is its User-Agent up to the first `/`."""

from __future__ import annotations

from .fieldpath import (
    MISSING,
    Path,
    field_schema,
    fields_v1,
    is_atomic_map,
    item_element,
    items_schema,
    list_kind,
    paths_from_fields_v1,
    resolved,
)
from .typed import empty_object
from .values import now

_STRIPPED = {("apiVersion",), ("kind",), ("metadata",)} | {
    ("metadata", key) for key in ("name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName",
                                  "generation", "managedFields", "resourceVersion")}

def manager_name(field_manager: str | None, user_agent: str | None) -> str:
    """managerOrUserAgent (k8s.io/apiserver pkg/endpoints/handlers/rest.go): the User-Agent cut at its first `/`."""
    if field_manager:
        return field_manager
    agent = (user_agent or "").split("/", 1)[0]
    return agent[:128]


def changes(lhs, rhs, schema=None, path: Path = ()) -> tuple[set[Path], set[Path]]:
    """(added or modified, removed) paths from `lhs` to `rhs` (typed.Comparison, Added and Modified joined)."""
    changed: set[Path] = set()
    removed: set[Path] = set()
    _compare(lhs, rhs, schema, path, changed, removed)
    return changed, removed


def _leaf(lhs, rhs, path: Path, changed: set, removed: set) -> None:
    if lhs is MISSING:
        changed.add(path)
    elif rhs is MISSING:
        removed.add(path)
    elif lhs != rhs:
        changed.add(path)


def _compare(lhs, rhs, schema, path: Path, changed: set, removed: set) -> None:
    if isinstance(lhs, dict) or isinstance(rhs, dict):
        left = lhs if isinstance(lhs, dict) else {}
        right = rhs if isinstance(rhs, dict) else {}
        if is_atomic_map(schema) or (not left and not right):
            _leaf(lhs, rhs, path, changed, removed)
            return
        for key in {**left, **right}:
            _compare(left.get(key, MISSING), right.get(key, MISSING), field_schema(schema, key), (*path, key),
                     changed, removed)
    elif isinstance(lhs, list) or isinstance(rhs, list):
        left = lhs if isinstance(lhs, list) else []
        right = rhs if isinstance(rhs, list) else []
        kind, keys = list_kind(resolved(schema))
        if kind == "atomic" or (not left and not right):
            _leaf(lhs, rhs, path, changed, removed)
            return
        items = items_schema(schema)
        left_items: dict = {}
        right_items: dict = {}
        for source, target in ((left, left_items), (right, right_items)):
            for item in source:
                target.setdefault(item_element(item, kind, keys, items), item)
        for element in {**left_items, **right_items}:
            _compare(left_items.get(element, MISSING), right_items.get(element, MISSING), items, (*path, element),
                     changed, removed)
    else:
        _leaf(lhs, rhs, path, changed, removed)
        return
    if path and lhs is MISSING:
        changed.add(path)
    elif path and rhs is MISSING:
        removed.add(path)


def _ignored(path: Path, rt, subresource: str | None) -> bool:
    if path in _STRIPPED:
        return True
    if subresource == "status":
        return not path or path[0] != "status"
    return bool(path) and path[0] == "status" and rt.has_status


def _key(entry: dict) -> tuple:
    return (entry.get("manager"), entry.get("operation"), entry.get("subresource", ""))


def _sort_key(entry: dict) -> tuple:
    """sortEncodedManagedFields: operation, time (seconds), manager, apiVersion, subresource."""
    return (entry.get("operation", ""), (entry.get("time") or "")[:19], entry.get("manager", ""),
            entry.get("apiVersion", ""), entry.get("subresource", ""))


def updated_entries(rt, version: str | None, old: dict | None, new: dict, manager: str,
                    subresource: str | None = None, schema=None) -> list[dict]:
    """managedFields after `manager` wrote `new` over `old` (None: a create)."""
    lhs = old if old is not None else empty_object(rt)
    changed, removed = changes(lhs, new, schema)
    changed = {p for p in changed if not _ignored(p, rt, subresource)}
    removed = {p for p in removed if not _ignored(p, rt, subresource)}
    mine = (manager, "Update", subresource or "")
    entries, previous, own = [], None, set()
    for entry in (old or {}).get("metadata", {}).get("managedFields") or []:
        owned = paths_from_fields_v1(entry.get("fieldsV1") or {})
        if _key(entry) == mine:
            previous, own = entry, owned
            continue
        kept = {p for p in owned if p not in changed and p not in removed}
        if kept == owned:
            entries.append(entry)
        elif kept:
            entries.append({**entry, "fieldsV1": fields_v1(kept)})
    before, own = own, (own - removed) | changed
    if previous is not None and own == before:
        entries.append(previous)  # nothing of its own changed: the entry keeps its time
    elif own:
        entry = {"manager": manager, "operation": "Update", "apiVersion": rt.api_version(version), "time": now(),
                 "fieldsType": "FieldsV1", "fieldsV1": fields_v1(own)}
        if subresource:
            entry["subresource"] = subresource
        entries.append(entry)
    return sorted(entries, key=_sort_key)
