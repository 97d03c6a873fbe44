"""What the API server knows of the requests it answers: one parsed request, and the counts since start or reset."""

from __future__ import annotations

import json
import threading
from collections import Counter

from . import errors, protobuf
from .errors import ApiError
from .store import Store


class Stats:
    """Request counts since start or reset; `writes` comes from the store (operations that changed state)."""

    def __init__(self, store: Store):
        self._store = store
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._requests = 0
            self._by_verb: Counter = Counter()
            self._writes_base = self._store.writes

    def count(self, verb: str) -> None:
        with self._lock:
            self._requests += 1
            self._by_verb[verb] += 1

    def snapshot(self) -> dict:
        with self._lock:
            return {"requests": self._requests, "by_verb": dict(self._by_verb),
                    "writes": self._store.writes - self._writes_base}


class Request:
    """One parsed request against a resource path."""

    def __init__(self, method: str, path: str, query: dict, headers, body: bytes):
        self.method, self.path, self.query, self.headers, self.body = method, path, query, headers, body
        self.rt = self.version = self.namespace = self.name = self.subresource = None
        self.group = ""
        self.watch = self.flag("watch")
        self.verb = ""

    def param(self, name: str, default: str | None = None) -> str | None:
        return self.query.get(name, default)

    def flag(self, name: str) -> bool:
        """A boolean query parameter as Go's ParseBool reads it (the Python client sends `True`)."""
        return (self.query.get(name) or "").lower() in ("1", "t", "true")

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun") == "All"

    @property
    def field_validation(self) -> str:
        return self.query.get("fieldValidation") or "Warn"

    def json_body(self):
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type == "application/vnd.kubernetes.protobuf":
            try:
                return protobuf.decode(self.body)
            except protobuf.Unsupported as exc:
                # The sandbox reads protobuf only for the kinds kubectl's imperative `create` sends most; for the
                # rest it says so as a server does for a media type it lacks.
                raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                                                            f"accepted media types include: application/json, "
                                                            f"application/yaml (protobuf: {exc})") from None
        if content_type == "application/cbor":
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                                                        "accepted media types include: application/json, "
                                                        "application/yaml")
        try:
            return json.loads(self.body or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
