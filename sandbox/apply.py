"""Server-side apply, a part of Store: merging an apply configuration into the stored object, field ownership
per manager (metadata.managedFields), and conflicts between managers."""

from __future__ import annotations

from . import errors
from .errors import ApiError
from .kinds import ResourceType
from .patch import applied_fields, deep_merge, fields_v1, get_path, overlaps, paths_from_fields_v1, remove_path
from .values import clone, now


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
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                     f"({name})")
        status_only = subresource == "status"
        fields = applied_fields(applied, status_only)
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
            merged = deep_merge(clone(old), section)
            for path in previous - fields:
                if not any(overlaps(path, other) for paths in owned.values() for other in paths):
                    remove_path(merged, path)
            merged["metadata"]["managedFields"] = self._managed_entries(rt, version, entries, manager, previous,
                                                                        fields, owned, subresource)
            new = self._prepare_update(rt, old, merged, subresource, keep_managed=False)
            if status_only:
                new["metadata"]["managedFields"] = merged["metadata"]["managedFields"]
            result = self._finish_update(rt, version, old, new, dry_run, strict, warnings, subresource)
            return self._out(rt, result, version), False

    @staticmethod
    def _resolve_conflicts(rt, name, old, applied, fields, owned, force) -> None:
        causes = []
        for other, paths in owned.items():
            for theirs in list(paths):
                for mine in fields:
                    if not overlaps(mine, theirs):
                        continue
                    longer = mine if len(mine) >= len(theirs) else theirs
                    if get_path(old, longer) == get_path(applied, longer):
                        continue
                    if force:
                        paths.discard(theirs)
                    else:
                        causes.append({"reason": "FieldManagerConflict", "message": f'conflict with "{other}"',
                                       "field": "." + ".".join(longer)})
                    break
        if causes:
            listed = "\n".join(f"- {c['message']}: {c['field']}" for c in causes)
            count = f"{len(causes)} conflict" + ("s" if len(causes) > 1 else "")
            raise ApiError(409, "Conflict", f"Apply failed with {count}:\n{listed}", name=name, group=rt.group,
                           kind=rt.plural, causes=causes)

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
