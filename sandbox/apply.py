"""Server-side apply, a part of Store: merging an apply configuration into the stored object, field ownership
per manager (metadata.managedFields), and conflicts between managers (sigs.k8s.io/structured-merge-diff v4.6.0
merge/update.go: a conflict is a field another applier owns that this apply would change; `force` takes it over).
Lists with keys are merged and owned item by item (`sandbox.fieldpath`)."""

from __future__ import annotations

from . import errors
from .errors import ApiError
from .fieldpath import (
    Path,
    applied_fields,
    deep_merge,
    describe,
    fields_v1,
    get_path,
    is_item_marker,
    overlaps,
    paths_from_fields_v1,
    remove_path,
)
from .kinds import ResourceType
from .validation import object_meta_schema
from .values import clone, now

_WITH_META: dict = {}  # a CRD schema (kept alive beside its id) -> the same with ObjectMeta's schema for metadata


class ServerSideApply:
    """Mixed into Store; uses its lock and its create/update steps."""

    def apply(self, rt: ResourceType, namespace: str | None, name: str, applied: dict, manager: str, *,
              force: bool = False, subresource: str | None = None, version: str | None = None,
              dry_run: bool = False, strict: bool = False, warnings: list | None = None) -> tuple[dict, bool]:
        """Server-side apply; returns (object, created)."""
        warnings = [] if warnings is None else warnings
        if not isinstance(applied, dict):
            raise errors.bad_request("the apply configuration must be an object")
        meta = applied.get("metadata") or {}
        if meta.get("managedFields") is not None:  # fieldmanager.go Apply: an apply configuration claims no fields
            raise errors.bad_request("metadata.managedFields must be nil")
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                     f"({name})")
        status_only = subresource == "status"
        schema = self._apply_schema(rt, version)
        fields = applied_fields(applied, status_only, schema)
        with self._lock:
            old = self._stored(rt, namespace, name)
            if old is None:
                if status_only:
                    raise errors.not_found(rt.plural, rt.group, name)
                obj = self._prepare_create(rt, {**applied, "metadata": {**meta, "name": name}}, namespace, version)
                obj["metadata"]["managedFields"] = [self._managed_entry(rt, version, manager, fields, subresource)]
                created = self._create_locked(rt, obj, version, dry_run, strict, warnings)
                return self._out(rt, created, version), True
            if meta.get("resourceVersion") and meta["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name, errors.STALE)
            entries = clone(old["metadata"].get("managedFields") or [])
            owned = {e["manager"]: paths_from_fields_v1(e.get("fieldsV1") or {}) for e in entries
                     if e.get("operation") == "Apply" and e.get("subresource", "") == (subresource or "")}
            previous = owned.pop(manager, set())
            self._resolve_conflicts(rt, name, old, applied, fields, owned, force)
            section = {k: v for k, v in applied.items() if (k == "status") == status_only and k not in
                       ("apiVersion", "kind")}
            if not status_only:
                section["metadata"] = {k: v for k, v in meta.items() if k not in ("name", "namespace",
                                                                                   "resourceVersion")}
            merged = deep_merge(clone(old), section, schema)
            for path in sorted(previous - fields, key=len, reverse=True):
                if not any(_keeps(other, path) for paths in owned.values() for other in paths):
                    remove_path(merged, path, schema)
            merged["metadata"]["managedFields"] = self._managed_entries(rt, version, entries, manager, previous,
                                                                        fields, owned, subresource)
            new = self._prepare_update(rt, old, merged, subresource, keep_managed=False)
            if status_only:
                new["metadata"]["managedFields"] = merged["metadata"]["managedFields"]
            result = self._finish_update(rt, version, old, new, dry_run, strict, warnings, subresource)
            return self._out(rt, result, version), False

    def _apply_schema(self, rt: ResourceType, version: str | None):
        """The schema whose list types decide per-item ownership: a CRD's structural schema, a built-in's OpenAPI."""
        version = version or rt.versions[0]
        if not rt.builtin:
            schema = rt.crd_schemas.get(version)
            if schema is None:
                return None
            key = (id(schema), "with-object-meta")
            if key not in _WITH_META:
                _WITH_META[key] = (schema, {**schema, "properties": {**(schema.get("properties") or {}),
                                                                     "metadata": object_meta_schema()}})
            return _WITH_META[key][1]
        validator = self.validator.schema_validator(rt, version)
        return validator.schema if validator is not None else None

    @staticmethod
    def _resolve_conflicts(rt, name, old, applied, fields, owned, force) -> None:
        causes = []
        for other, paths in owned.items():
            for theirs in list(paths):
                for mine in fields:
                    if not overlaps(mine, theirs):
                        continue
                    shorter = mine if len(mine) <= len(theirs) else theirs
                    if is_item_marker(shorter):
                        continue  # owning an item is owning its membership, not the values inside it
                    longer = mine if len(mine) >= len(theirs) else theirs
                    if get_path(old, longer) == get_path(applied, longer):
                        continue
                    if force:
                        paths.discard(theirs)
                    else:
                        causes.append({"reason": "FieldManagerConflict", "message": f'conflict with "{other}"',
                                       "field": describe(longer), "manager": other, "path": longer})
                    break
        if causes:
            causes.sort(key=lambda c: c.pop("path"))  # structured-merge-diff reports them in path order
            raise ApiError(409, "Conflict", _conflict_message(causes), name=name, group=rt.group, kind=rt.plural,
                           causes=causes)

    @staticmethod
    def _managed_entry(rt, version, manager, fields, subresource) -> dict:
        entry = {"manager": manager, "operation": "Apply", "apiVersion": rt.api_version(version), "time": now(),
                 "fieldsType": "FieldsV1", "fieldsV1": fields_v1(fields)}
        if subresource:
            entry["subresource"] = subresource
        return entry

    def _managed_entries(self, rt, version, entries, manager, previous, fields, owned, subresource) -> list[dict]:
        """managedFields after an apply; unchanged entries keep their time so a no-op apply changes nothing."""
        result = []
        for entry in entries:
            name, sub = entry["manager"], entry.get("subresource", "")
            if entry.get("operation") != "Apply" or sub != (subresource or ""):
                result.append(entry)
            elif name == manager:
                if fields == previous:
                    result.append(entry)
            elif owned.get(name):
                if paths_from_fields_v1(entry.get("fieldsV1") or {}) != owned[name]:
                    entry = {**entry, "fieldsV1": fields_v1(owned[name]), "time": now()}
                result.append(entry)
        if fields != previous and fields:
            result.append(self._managed_entry(rt, version, manager, fields, subresource))
        return result


def _keeps(other: Path, path: Path) -> bool:
    """Another manager's field keeps `path` from removal: the same field, one inside it, or an atomic field around
    it; owning a list item keeps the item, not every field another manager set in it."""
    return overlaps(other, path) and not (len(other) < len(path) and is_item_marker(other))


def _conflict_message(causes: list[dict]) -> str:
    """k8s.io/apiserver pkg/endpoints/handlers/fieldmanager (internal/conflict.go getConflictMessage): one
    conflict on one line, several grouped under their managers, managers sorted. Takes the causes' `manager`."""
    managers = [cause.pop("manager") for cause in causes]
    if len(causes) == 1:
        return f"Apply failed with 1 conflict: {causes[0]['message']}: {causes[0]['field']}"
    lines = []
    for manager in sorted(set(managers)):
        lines.append(f'conflicts with "{manager}":')
        lines += [f"- {c['field']}" for c, m in zip(causes, managers, strict=True) if m == manager]
    return f"Apply failed with {len(causes)} conflicts: " + "\n".join(lines)
