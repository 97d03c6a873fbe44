"""Watches, a part of Store: the bounded per-kind event history, and waiting for the next change."""

from __future__ import annotations

from .kinds import ResourceType
from .selectors import Matcher

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


class Gone(Exception):
    """A watch asked for history older than the bounded per-kind event history."""


class Watches:
    """Mixed into Store; reads its objects, history and resourceVersion under its lock."""

    def watch_start(self, rt: ResourceType, since: int | None, matcher: Matcher | None,
                    namespace: str | None) -> tuple[list[tuple[int, str, dict]], int]:
        """Initial events and the resourceVersion to continue from. `since=None`: synthetic ADDED for every
        current object (what a watch without resourceVersion gets); else the history after `since`."""
        with self._lock:
            if since is None:
                slot = self._objects.get(rt.key, {})
                pools = [slot.get(namespace, {})] if namespace else list(slot.values())
                events = [(int(o["metadata"]["resourceVersion"]), ADDED, o) for names in pools
                          for o in names.values() if matcher is None or matcher(o)]
                events.sort(key=lambda e: e[0])
                return events, self._rv
            return self.events_since(rt, since, matcher, namespace)

    def events_since(self, rt: ResourceType, since: int, matcher: Matcher | None,
                     namespace: str | None) -> tuple[list[tuple[int, str, dict]], int]:
        """Events of this kind after `since`, and the resourceVersion they bring the watcher up to."""
        with self._lock:
            # Like a restarted kube-apiserver's watch cache, a restored store holds no history before its start.
            floor = max(self._floor.get(rt.key, 0), self._restored_at)
            if since < floor:
                raise Gone(f"too old resource version: {since} ({floor + 1})")
            history = self._history.get(rt.key, ())
            out = []
            for rv, event_type, obj, previous in reversed(history):
                if rv <= since:
                    break
                if namespace and obj["metadata"].get("namespace") != namespace:
                    continue
                if matcher is None:
                    out.append((rv, event_type, obj))
                    continue
                now = matcher(obj)
                if event_type == MODIFIED and previous is not None:
                    # An object entering the selector is ADDED for this watcher; one leaving it is DELETED with
                    # its previous content at this event's resourceVersion (cache_watcher.go convertToWatchEvent).
                    before = matcher(previous)
                    if now and not before:
                        event_type = ADDED
                    elif before and not now:
                        event_type, now = DELETED, True
                        obj = {**previous, "metadata": {**previous["metadata"], "resourceVersion": str(rv)}}
                if now:
                    out.append((rv, event_type, obj))
            out.reverse()
            return out, self._rv

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Block until the store's resourceVersion passes `since` or `timeout` elapses; returns the current one."""
        with self._changed:
            if self._rv <= since:
                self._changed.wait(timeout)
            return self._rv

    def wake_watchers(self) -> None:
        with self._changed:
            self._changed.notify_all()
