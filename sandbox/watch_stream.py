"""Serving one watch request: initial events, the changes after them, bookmarks, 410 Gone and the timeout.

What a kube-apiserver with its watch cache does (k8s.io/apiserver, staging/src/k8s.io/apiserver/pkg/storage/
cacher/cacher.go, cache_watcher.go, watch_cache.go):
- `resourceVersion` unset or "0": synthetic ADDED for every current object, then the changes after it; any other
  value: the changes after it, 410 `Expired` ("too old resource version") when the history no longer holds them,
  and "Too large resource version" (504 `Timeout`, cause `ResourceVersionTooLarge`) when it is newer than the
  server after waiting up to 3 s for it (watch_cache.go `waitUntilFreshAndBlock`, blockTimeout).
- An error found when the watch starts arrives as an ERROR event in a 200 stream (cacher.go `newErrWatcher`).
- `allowWatchBookmarks=true`: BOOKMARK events, an object of the kind with only `metadata.resourceVersion`, roughly
  every minute and 2 s before the watch's deadline (cache_watcher.go `nextBookmarkTime`), so a client resumes
  from a recent version even when nothing it watches changed.
- `sendInitialEvents=true` (needs `allowWatchBookmarks`): after the initial ADDED events, a bookmark annotated
  `k8s.io/initial-events-end: "true"` (storage.AnnotateInitialEventsEndBookmark).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time

from . import errors
from .errors import ApiError
from .store import Gone

DEFAULT_TIMEOUT = 1800
BOOKMARK_INTERVAL = 60.0  # the cacher's bookmarkFrequency
PRE_TIMEOUT_BOOKMARK = 2.0  # seconds before the deadline
FRESHNESS_WAIT = 3.0  # watch_cache.go blockTimeout
_POLL = 0.5  # how often an idle watch checks for a stopping server or a vanished client
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def write_chunk(h, event: dict) -> None:
    data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def client_gone(sock) -> bool:
    """True when the client closed its end (a readable socket with nothing to read)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def _since(req) -> int | None:
    rv = req.param("resourceVersion")
    try:
        return None if rv in (None, "", "0") else int(rv)
    except ValueError:
        raise errors.bad_request(f'invalid resource version "{rv}"') from None


def _too_large(store, since: int) -> ApiError | None:
    """A resourceVersion the server has not reached: wait briefly for it, as the watch cache does."""
    current = store.resource_version
    deadline = time.monotonic() + FRESHNESS_WAIT
    while current < since and time.monotonic() < deadline:
        current = store.wait_for_change(current, deadline - time.monotonic())
    if current >= since:
        return None
    return ApiError(504, "Timeout", f"Too large resource version: {since}, current: {current}",
                    causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    retry_after=1)


class WatchStream:
    """One watch: `serve()` writes the chunked event stream until the timeout, the server stops or the client goes."""

    def __init__(self, api, h, req, matcher, render_table):
        self.api, self.h, self.req, self.matcher = api, h, req, matcher
        self.store, self.rt = api.store, req.rt
        self.render_table = render_table  # (events' objects, first) -> Table, for `Accept: ...;as=Table`
        self.bookmarks = req.flag("allowWatchBookmarks")
        self.initial_end = req.flag("sendInitialEvents")
        if self.initial_end and not self.bookmarks:
            raise ApiError(422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: allowWatchBookmarks: Required "
                                           "value: allowWatchBookmarks required when sendInitialEvents is set")
        self.since = _since(req)
        timeout = float(req.param("timeoutSeconds") or DEFAULT_TIMEOUT)
        self.deadline = time.monotonic() + timeout
        self.first_table = True

    def _write(self, event_type: str, obj: dict) -> None:
        rendered = self.store.render(self.rt, obj, self.req.version)
        if self.render_table is not None:
            rendered = self.render_table(rendered, self.first_table)
            self.first_table = False
        write_chunk(self.h, {"type": event_type, "object": rendered})

    def _bookmark(self, rv: int, initial_end: bool = False) -> None:
        meta: dict = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        write_chunk(self.h, {"type": "BOOKMARK", "object": {"apiVersion": self.rt.api_version(self.req.version),
                                                            "kind": self.rt.kind, "metadata": meta}})

    def _next_bookmark(self, now: float) -> float | None:
        """When the next bookmark is due: a minute on, or 2 s before the deadline if sooner; None once past."""
        due = min(now + self.api.bookmark_interval, self.deadline - PRE_TIMEOUT_BOOKMARK)
        return due if due > now else None

    def serve(self) -> None:
        h, store = self.h, self.store
        h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                      b"Cache-Control: no-cache, private\r\n\r\n")
        try:
            error = _too_large(store, self.since) if self.since is not None else None
            if error is not None:
                write_chunk(h, {"type": "ERROR", "object": error.status()})
                events = None
            else:
                events, last = store.watch_start(self.rt, self.since, self.matcher, self.req.namespace)
            if events is not None:
                self._loop(events, last)
        except Gone as exc:
            write_chunk(h, {"type": "ERROR", "object": ApiError(410, "Expired", str(exc)).status()})
        except OSError:
            h.close_connection = True
            return
        with contextlib.suppress(OSError):
            h.wfile.write(b"0\r\n\r\n")

    def _loop(self, events, last: int) -> None:
        store, rt, namespace = self.store, self.rt, self.req.namespace
        initial = self.since is None
        next_bookmark = self._next_bookmark(time.monotonic()) if self.bookmarks else None
        while True:
            for _, event_type, obj in events:
                self._write(event_type, obj)
            if initial and self.initial_end:
                self._bookmark(last, initial_end=True)
            initial = False
            now = time.monotonic()
            if next_bookmark is not None and now >= next_bookmark:
                self._bookmark(last)
                next_bookmark = self._next_bookmark(now)
            remaining = self.deadline - now
            if remaining <= 0 or self.api.stopping.is_set() or client_gone(self.h.connection):
                return
            wait = min(remaining, _POLL, next_bookmark - now if next_bookmark is not None else _POLL)
            current = store.wait_for_change(last, wait)
            events = []
            if current > last:
                events, last = store.events_since(rt, last, self.matcher, namespace)
