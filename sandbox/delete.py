"""Deletion, a part of Store: finalizers, preconditions, collections, and the namespace controller's part (a
deleted namespace is Terminating while its contents are deleted, each waiting for its own finalizers, and goes once
it is empty)."""

from __future__ import annotations

from . import errors
from .kinds import ResourceType
from .selectors import Matcher
from .values import clone, now
from .watch import DELETED, MODIFIED

_NAMESPACE_KEY = ("", "Namespace")


class Deletion:
    """Mixed into Store; writes through its commit under its lock."""

    def _remove_locked(self, rt: ResourceType, obj: dict) -> dict:
        if rt.key == _NAMESPACE_KEY:
            name = obj["metadata"]["name"]
            for key, slot in list(self._objects.items()):
                child_rt = self.registry.by_key.get(key)
                for child in list(slot.get(name, {}).values()):
                    if child_rt is not None:
                        self._commit(child_rt, DELETED, clone(child))
        removed = self._commit(rt, DELETED, clone(obj))
        namespace = obj["metadata"].get("namespace")
        if namespace:
            self._finish_namespace(namespace)
        return removed

    def _contents(self, namespace: str) -> list[tuple[ResourceType, dict]]:
        return [(self.registry.by_key[key], child) for key, slot in list(self._objects.items())
                if key in self.registry.by_key for child in list(slot.get(namespace, {}).values())]

    def _terminate_namespace(self, rt, old) -> dict:
        """The namespace controller: a deleted namespace is Terminating while its contents are deleted (each
        waiting for its own finalizers), and goes once it is empty."""
        terminating = clone(old)
        terminating["metadata"]["deletionTimestamp"] = now()
        terminating["status"] = {"phase": "Terminating"}
        self.writes += 1
        self._commit(rt, MODIFIED, terminating)
        for child_rt, child in self._contents(old["metadata"]["name"]):
            self._delete_locked(child_rt, child, False)
        self._finish_namespace(old["metadata"]["name"])
        return terminating

    def _finish_namespace(self, name: str) -> None:
        rt = self.registry.by_key[_NAMESPACE_KEY]
        ns = self._stored(rt, None, name)
        if ns is not None and ns["metadata"].get("deletionTimestamp") and not ns["metadata"].get("finalizers") \
                and not self._contents(name):
            self._commit(rt, DELETED, clone(ns))

    def delete(self, rt: ResourceType, namespace: str | None, name: str, *, version: str | None = None,
               dry_run: bool = False, preconditions: dict | None = None) -> dict:
        with self._lock:
            old = self._require(rt, namespace, name)
            self._check_preconditions(rt, old, preconditions or {})
            self.admission.validate_delete(rt, old)
            return self._out(rt, self._delete_locked(rt, old, dry_run), version)

    def _check_preconditions(self, rt, old, preconditions) -> None:
        for field in ("uid", "resourceVersion"):
            wanted = preconditions.get(field)
            if wanted and wanted != old["metadata"].get(field):
                label = "UID" if field == "uid" else "ResourceVersion"
                raise errors.conflict(rt.plural, rt.group, old["metadata"]["name"],
                                      f"Precondition failed: {label} in precondition: {wanted}, {label} in object "
                                      f"meta: {old['metadata'].get(field)}")

    def _delete_locked(self, rt, old, dry_run) -> dict:
        meta = old["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old
            new = clone(old)
            new["metadata"]["deletionTimestamp"] = now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if rt.key == _NAMESPACE_KEY:
                new["status"] = {"phase": "Terminating"}
            if dry_run:
                return new
            self.writes += 1
            return self._commit(rt, MODIFIED, new)
        if dry_run:
            return old
        if rt.key == _NAMESPACE_KEY:
            return old if meta.get("deletionTimestamp") else self._terminate_namespace(rt, old)
        self.writes += 1
        return self._remove_locked(rt, clone(old))

    def delete_collection(self, rt: ResourceType, namespace: str | None = None, matcher: Matcher | None = None, *,
                          version: str | None = None, dry_run: bool = False) -> dict:
        with self._lock:
            listing = self.list(rt, namespace, matcher, version=version)
            writes = self.writes
            items = [self._out(rt, self._delete_locked(rt, self._require(rt, o["metadata"].get("namespace"),
                                                                         o["metadata"]["name"]), dry_run), version)
                     for o in listing["items"]]
            self.writes = min(self.writes, writes + 1)  # one request, one write
            listing["items"] = items
            listing["metadata"]["resourceVersion"] = str(self._rv)
            return listing
