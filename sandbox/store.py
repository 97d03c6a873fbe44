"""The in-memory object store with Kubernetes semantics, shared by the HTTP server and in-process controllers.

Objects are stored once per kind (not per version), indexed by (group, kind) -> namespace -> name, so a request
only touches the objects it asks for. A stored object is never mutated in place: every write stores a new dict,
which lets watch histories and readers share them safely. Methods return copies.

Controllers subscribe with `store.subscribe(callback)`; `callback(event_type, resource_type, obj)` runs after each
committed change (ADDED / MODIFIED / DELETED), synchronously and under the store lock (which is re-entrant, so a
callback may write to the store, but it must be quick).
"""

from __future__ import annotations

import base64
import json
import random
import threading
import uuid
from collections import deque
from collections.abc import Callable

from . import errors, strategic
from .admission import Admission
from .apply import ServerSideApply
from .defaults import BuiltinDefaults
from .delete import Deletion
from .errors import ApiError
from .kinds import Registry, ResourceType
from .managed_update import updated_entries
from .patch import PatchError, json_patch, merge_patch
from .selectors import Matcher
from .typed import go_shape
from .validation import Validator
from .values import clone, now

# The event types and Gone belong to the store's interface (the server and controllers import them from here).
from .watch import ADDED, DELETED, MODIFIED, Gone, Watches  # noqa: F401

_NAMESPACE_KEY = ("", "Namespace")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_IMMUTABLE_METADATA = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "generation")


def _spec_changed(old: dict, new: dict) -> bool:
    """What bumps metadata.generation: spec, or for kinds without spec any field outside metadata and status."""
    if "spec" in old or "spec" in new:
        return old.get("spec") != new.get("spec")
    ignored = ("metadata", "status", "apiVersion", "kind")
    return {k: v for k, v in old.items() if k not in ignored} != {k: v for k, v in new.items() if k not in ignored}


def _without_rv(obj: dict) -> dict:
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    return {**obj, "metadata": meta}


class Store(ServerSideApply, Deletion, Watches):
    def __init__(self, registry: Registry, validator: Validator | None = None, history: int = 1000):
        self.registry = registry
        self.validator = validator or Validator(registry=registry)
        self._history_size = history
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._rv = 0
        self._objects: dict[tuple[str, str], dict[str, dict[str, dict]]] = {}
        self._history: dict[tuple[str, str], deque] = {}
        self._floor: dict[tuple[str, str], int] = {}  # newest resourceVersion evicted from a kind's history
        self._restored_at = 0  # the resourceVersion a restored store starts from: it has no history before it
        self._subscribers: list[Callable] = []
        self._logs: dict[tuple[str, str], str] = {}
        self.writes = 0
        self._defaults = BuiltinDefaults()
        self.admission = Admission(self)

    # Plumbing --------------------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def kind(self, api_version: str, kind: str) -> ResourceType:
        """The resource type of `apiVersion`/`kind`, for in-process callers."""
        rt = self.registry.for_object(api_version, kind)
        if rt is None:
            raise KeyError(f'no matches for kind "{kind}" in version "{api_version}"')
        return rt

    def subscribe(self, callback: Callable[[str, ResourceType, dict], None]) -> Callable[[], None]:
        """Call `callback(event_type, resource_type, obj)` after every committed change; returns an unsubscribe."""
        with self._lock:
            self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def _commit(self, rt: ResourceType, event_type: str, obj: dict) -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        meta = obj["metadata"]
        slot = self._objects.setdefault(rt.key, {})
        namespace = meta.get("namespace", "")
        previous = slot.get(namespace, {}).get(meta["name"]) if event_type == MODIFIED else None
        if event_type == DELETED:
            names = slot.get(namespace, {})
            names.pop(meta["name"], None)
            if not names:
                slot.pop(namespace, None)
            if rt.key == ("", "Pod"):
                self._logs.pop((namespace, meta["name"]), None)
        else:
            slot.setdefault(namespace, {})[meta["name"]] = obj
        history = self._history.setdefault(rt.key, deque(maxlen=self._history_size))
        if len(history) == self._history_size:
            self._floor[rt.key] = history[0][0]
        history.append((self._rv, event_type, obj, previous))
        self.admission.after_commit(event_type, rt, obj, previous)
        for callback in list(self._subscribers):
            callback(event_type, rt, clone(obj))
        self._changed.notify_all()
        return obj

    def _stored(self, rt: ResourceType, namespace: str | None, name: str) -> dict | None:
        return self._objects.get(rt.key, {}).get(namespace or "", {}).get(name)

    def _require(self, rt: ResourceType, namespace: str | None, name: str) -> dict:
        obj = self._stored(rt, namespace, name)
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return obj

    @staticmethod
    def render(rt: ResourceType, obj: dict, version: str | None) -> dict:
        """The stored object as seen through `version` (no conversion: custom kinds' versions share one schema)."""
        return {**obj, "apiVersion": rt.api_version(version)}

    def _out(self, rt, obj, version):
        return clone(self.render(rt, obj, version))

    # Reads -----------------------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str, *, version: str | None = None) -> dict:
        with self._lock:
            return self._out(rt, self._require(rt, namespace, name), version)

    def list(self, rt: ResourceType, namespace: str | None = None, matcher: Matcher | None = None, *,
             version: str | None = None, limit: int | None = None, continue_: str | None = None) -> dict:
        """A `<Kind>List` sorted by namespace and name, with `limit`/`continue` paging."""
        start = None
        if continue_:
            try:
                start = tuple(json.loads(base64.urlsafe_b64decode(continue_.encode())))
            except ValueError:
                raise errors.ApiError(410, "Expired", "The provided continue parameter is too old") from None
        with self._lock:
            slot = self._objects.get(rt.key, {})
            if namespace:
                pools = [(namespace, slot.get(namespace, {}))]
            else:
                pools = sorted(slot.items())
            items, more = [], 0
            for ns, names in pools:
                for name in sorted(names):
                    if start is not None and (ns, name) <= start:
                        continue
                    obj = names[name]
                    if matcher is not None and not matcher(obj):
                        continue
                    if limit and len(items) >= limit:
                        more += 1
                        continue
                    items.append(self._out(rt, obj, version))
            meta: dict = {"resourceVersion": str(self._rv)}
        if more:
            last = items[-1]["metadata"]
            token = json.dumps([last.get("namespace", ""), last["name"]]).encode()
            meta["continue"] = base64.urlsafe_b64encode(token).decode()
            meta["remainingItemCount"] = more
        return {"apiVersion": rt.api_version(version), "kind": f"{rt.kind}List", "metadata": meta, "items": items}

    # Writes ----------------------------------------------------------------------------------------------------

    def _prepare_create(self, rt, obj, namespace, version) -> dict:
        obj = clone(obj)
        if not isinstance(obj.get("metadata"), dict):
            obj["metadata"] = {}
        meta = obj["metadata"]
        obj["apiVersion"], obj["kind"] = rt.api_version(version), rt.kind
        if rt.namespaced:
            if namespace and meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                         "on the request")
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "generation"):
            meta.pop(key, None)
        if rt.has_status:
            obj.pop("status", None)  # status is written through /status only
        self._defaults.apply(rt.key, obj, creating=True)  # decoding comes before a name is generated
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(_GENERATE_ALPHABET, k=5))
        return obj

    def _create_locked(self, rt, obj, version, dry_run, strict, warnings, manager: str | None = None) -> dict:
        """Create in kube-apiserver's order: decoding's defaults (what the field manager records), mutating
        admission, the registry's PrepareForCreate, validation, validating admission."""
        meta = obj["metadata"]
        version = version or rt.versions[0]
        self.admission.default("CREATE", rt, obj, None)
        self.validator.apply_schema_defaults(rt, version, obj)
        decoded = clone(obj) if manager else None
        if decoded is not None:
            self.validator.prune_unknown(rt, version, decoded)
        meta["uid"] = str(uuid.uuid4())
        self.admission.mutate("CREATE", rt, obj, None, None)
        self._defaults.prepare_for_create(rt.key, obj)
        warnings.extend(self.validator.check(rt, version, obj, strict=strict))
        self.admission.validate("CREATE", rt, obj, None, None)
        self._defaults.read_back(rt.key, obj)
        self._go_shape(rt, version, obj)
        namespace = meta.get("namespace")
        if rt.namespaced:
            ns = self._stored(self.registry.by_key[_NAMESPACE_KEY], None, namespace)
            if ns is None:
                raise errors.not_found("namespaces", "", namespace)
            if ns["metadata"].get("deletionTimestamp"):
                raise ApiError(403, "Forbidden", f'{rt.plural} "{meta["name"]}" is forbidden: unable to create new '
                                                 f"content in namespace {namespace} because it is being terminated",
                               name=meta["name"], group=rt.group, kind=rt.plural, causes=[
                                   {"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                    "message": f"namespace {namespace} is being terminated"}])
        if self._stored(rt, namespace, meta["name"]) is not None:
            raise errors.already_exists(rt.plural, rt.group, meta["name"])
        meta["creationTimestamp"] = now()
        if decoded is not None:
            meta["managedFields"] = updated_entries(rt, version, None, self._go_shape(rt, version, decoded), manager,
                                                    schema=self._apply_schema(rt, version))
        if rt.has_generation:
            meta["generation"] = 1
        if dry_run:
            return obj
        self.writes += 1
        return self._commit(rt, ADDED, obj)

    def _go_shape(self, rt, version, obj: dict) -> dict:
        return go_shape(rt, obj, self._apply_schema(rt, version))

    def create(self, rt: ResourceType, obj: dict, namespace: str | None = None, *, version: str | None = None,
               dry_run: bool = False, strict: bool = False, warnings: list | None = None,
               manager: str | None = None) -> dict:
        """`manager`: the field manager that owns what the create set (metadata.managedFields); None records none."""
        obj = self._prepare_create(rt, obj, namespace, version)
        with self._lock:
            return self._out(rt, self._create_locked(rt, obj, version, dry_run, strict, [] if warnings is None
                                                     else warnings, manager), version)

    def _prepare_update(self, rt, old: dict, new: dict, subresource: str | None, keep_managed: bool = True) -> dict:
        if subresource == "status":
            result = clone(old)
            if new.get("status") is None:
                result.pop("status", None)
            else:
                result["status"] = clone(new["status"])
            return result
        result = clone(new)
        if not isinstance(result.get("metadata"), dict):
            result["metadata"] = {}
        result["apiVersion"], result["kind"] = old["apiVersion"], rt.kind
        if rt.has_status:
            if "status" in old:
                result["status"] = clone(old["status"])
            else:
                result.pop("status", None)
        meta, old_meta = result["metadata"], old["metadata"]
        for key in _IMMUTABLE_METADATA + (("managedFields",) if keep_managed else ()):
            if key in old_meta:
                meta[key] = clone(old_meta[key])
            else:
                meta.pop(key, None)
        self._defaults.apply(rt.key, result, creating=False)
        return result

    def _finish_update(self, rt, version, old, new, dry_run, strict, warnings, subresource=None) -> dict:
        self.admission.default("UPDATE", rt, new, subresource)
        self.admission.mutate("UPDATE", rt, new, old, subresource)
        warnings.extend(self.validator.check(rt, version or rt.versions[0], new, strict=strict, check_name=False,
                                             old=old))
        self.admission.validate("UPDATE", rt, new, old, subresource)
        self._go_shape(rt, version or rt.versions[0], new)
        meta = new["metadata"]
        if rt.bumps_generation and _spec_changed(old, new):
            meta["generation"] = old["metadata"].get("generation", 1) + 1
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _without_rv(new) == _without_rv(old):
            return old
        if dry_run:
            return new
        self.writes += 1
        self._commit(rt, MODIFIED, new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove_locked(rt, new)
        return new

    def update(self, rt: ResourceType, obj: dict, namespace: str | None, name: str, *, subresource: str | None = None,
               version: str | None = None, dry_run: bool = False, strict: bool = False,
               warnings: list | None = None) -> dict:
        meta = obj.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                     f"({name})")
        with self._lock:
            old = self._require(rt, namespace, name)
            if meta.get("resourceVersion") and meta["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name, errors.STALE)
            new = self._prepare_update(rt, old, obj, subresource)
            result = self._finish_update(rt, version, old, new, dry_run, strict, [] if warnings is None else warnings,
                                         subresource)
            return self._out(rt, result, version)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, body, patch_type: str, *,
              subresource: str | None = None, version: str | None = None, dry_run: bool = False,
              strict: bool = False, warnings: list | None = None) -> dict:
        """`patch_type`: "merge", "strategic" or "json"."""
        with self._lock:
            old = self._require(rt, namespace, name)
            current = self.render(rt, old, version)
            try:
                if patch_type == "json":
                    patched = json_patch(current, body)
                elif isinstance(body, dict) and patch_type == "strategic":
                    patched = self._strategic(rt, version, current, body)
                elif isinstance(body, dict):
                    patched = merge_patch(current, body)
                else:
                    raise PatchError("a merge patch must be a JSON object")
            except PatchError as exc:
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                               f"{exc}") from None
            if not isinstance(patched, dict):
                raise errors.bad_request("the patch produced something that is not an object")
            patched = clone(patched)
            rv = (patched.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name, errors.STALE)
            new = self._prepare_update(rt, old, patched, subresource)
            result = self._finish_update(rt, version, old, new, dry_run, strict, [] if warnings is None else warnings,
                                         subresource)
            return self._out(rt, result, version)

    def _strategic(self, rt, version, current: dict, body: dict) -> dict:
        """Strategic merge needs the Go types' patch tags: built-in kinds only, as on a real server."""
        if not rt.builtin:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                                                         "media types include: application/json-patch+json, "
                                                         "application/merge-patch+json, application/apply-patch+yaml")
        validator = self.validator.schema_validator(rt, version or rt.versions[0])
        return strategic.merge(current, body, validator.schema if validator is not None else None)

    # Pod logs --------------------------------------------------------------------------------------------------

    def set_log(self, namespace: str, pod: str, text: str) -> None:
        """Set a pod's log text (what `pods/log` answers); a simulated kubelet writes here."""
        with self._lock:
            self._logs[(namespace, pod)] = text

    def append_log(self, namespace: str, pod: str, text: str) -> None:
        with self._lock:
            self._logs[(namespace, pod)] = self._logs.get((namespace, pod), "") + text

    def get_log(self, namespace: str, pod: str) -> str:
        with self._lock:
            self._require(self.registry.by_key[("", "Pod")], namespace, pod)
            return self._logs.get((namespace, pod), "")

    # Persistence -----------------------------------------------------------------------------------------------

    def snapshot(self) -> dict:
        with self._lock:
            objects = [obj for slot in self._objects.values() for names in slot.values() for obj in names.values()]
            return {"resourceVersion": self._rv, "objects": clone(objects),
                    "logs": [[ns, pod, text] for (ns, pod), text in self._logs.items()]}

    def restore(self, data: dict) -> int:
        """Load a snapshot into an empty store; objects of kinds this registry lacks are skipped. Returns count."""
        count = 0
        with self._lock:
            self._rv = max(self._rv, int(data.get("resourceVersion", 0)))
            self._restored_at = self._rv
            for obj in data.get("objects", []):
                rt = self.registry.for_object(obj.get("apiVersion", ""), obj.get("kind", ""))
                if rt is None:
                    continue
                meta = obj["metadata"]
                self._objects.setdefault(rt.key, {}).setdefault(meta.get("namespace", ""), {})[meta["name"]] = obj
                count += 1
            for ns, pod, text in data.get("logs", []):
                self._logs[(ns, pod)] = text
        return count
