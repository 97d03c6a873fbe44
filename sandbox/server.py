"""HTTP front end: kube-apiserver routing, discovery, watch streaming, and the `/_sandbox/` control endpoints."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import yaml

from . import errors, openapi, tables, upstream
from .errors import ApiError
from .faults import FIELDS, Faults
from .managed_update import manager_name
from .request import Request, Stats
from .selectors import combine, field_selector, label_selector
from .store import Store
from .watch_stream import BOOKMARK_INTERVAL, WatchStream

GIT_VERSION = upstream.KUBERNETES
VERSION_INFO = {"major": "1", "minor": GIT_VERSION.split(".")[1], "gitVersion": GIT_VERSION, "gitCommit": "sandbox",
                "gitTreeState": "clean", "buildDate": "2025-08-27T00:00:00Z", "goVersion": "go1.24.6",
                "compiler": "gc", "platform": "linux/amd64"}
PATCH_TYPES = {"application/merge-patch+json": "merge", "application/strategic-merge-patch+json": "strategic",
               "application/json-patch+json": "json", "application/apply-patch+yaml": "apply"}
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Api:
    """Routes a request to discovery, the store, or the sandbox control endpoints."""

    def __init__(self, store: Store, faults: Faults, stats: Stats, simulator=None,
                 bookmark_interval: float = BOOKMARK_INTERVAL):
        self.store, self.faults, self.stats = store, faults, stats
        self.bookmark_interval = bookmark_interval
        self.simulator = simulator
        self.registry = store.registry
        self.stopping = threading.Event()
        # SANDBOX_RECORD=<file>: every API request is appended to the file as a JSON line (method, path and query,
        # content type, body), so a corpus of what clients really send can be replayed elsewhere (bench/fidelity).
        self.record_file = os.environ.get("SANDBOX_RECORD") or None
        self._record_lock = threading.Lock()

    # Entry point -----------------------------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        split = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        path = split.path.rstrip("/") or "/"
        if self.record_file and not path.startswith("/_sandbox/"):
            self._record(method, h.path, h.headers.get("Content-Type") or "", body)
        try:
            if path.startswith("/_sandbox/"):
                return self._control(h, method, path, body)
            req = Request(method, path, query, h.headers, body)
            self._route(req)
            self.stats.count(req.verb or "discovery")
            if req.rt is None:
                return self._discovery(h, req)
            fault = self.faults.match(req.verb, req.group, req.rt.plural, req.subresource, req.namespace, req.name)
            if fault is not None:
                if fault.delay:
                    time.sleep(fault.delay)
                if fault.status is not None:
                    message = fault.message or f"injected fault {fault.id}: {fault.reason}"
                    raise ApiError(fault.status, fault.reason, message)
            self._serve(h, req)
        except ApiError as exc:
            send(h, exc.code, exc.status())

    def _record(self, method: str, path: str, content_type: str, body: bytes) -> None:
        line = json.dumps({"method": method, "path": path, "contentType": content_type,
                           "body": body.decode(errors="replace")}, separators=(",", ":"))
        with self._record_lock, open(self.record_file, "a") as f:
            f.write(line + "\n")

    # Routing ---------------------------------------------------------------------------------------------------

    def _route(self, req: Request) -> None:
        parts = req.path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return
        if not rest:
            return
        if rest[0] == "watch":
            req.watch, rest = True, rest[1:]
        if len(rest) >= 3 and rest[0] == "namespaces" and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
            req.namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise errors.path_not_found()
        rt = self.registry.lookup(group, version, rest[0])
        if rt is None or (req.namespace and not rt.namespaced):
            raise errors.path_not_found()
        req.rt, req.group, req.version = rt, group, version
        req.name = rest[1] if len(rest) > 1 else None
        req.subresource = rest[2] if len(rest) > 2 else None
        if req.subresource and req.subresource not in rt.subresources:
            raise errors.path_not_found()
        req.verb = self._verb(req)

    @staticmethod
    def _verb(req: Request) -> str:
        content_type = (req.headers.get("Content-Type") or "").split(";")[0].strip()
        named = req.name is not None
        verb = {
            "GET": ("get" if named and not req.watch else "watch" if req.watch else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "apply" if content_type == "application/apply-patch+yaml" else "patch",
            "DELETE": "delete" if named else "deletecollection",
        }.get(req.method)
        if verb is None or (verb in ("update", "patch", "apply") and not named) or (verb == "create" and named):
            raise errors.method_not_allowed(req.rt.plural, req.group)
        return verb

    # Discovery and server info ---------------------------------------------------------------------------------

    def _discovery(self, h, req: Request) -> None:
        path, registry = req.path, self.registry
        if req.method != "GET":
            raise errors.method_not_allowed("", "")
        if path in ("/healthz", "/readyz", "/livez"):
            return send(h, 200, "ok", "text/plain")
        if path == "/version":
            return send(h, 200, VERSION_INFO)
        if path.startswith("/openapi/"):
            return self._openapi(h, path)
        if path == "/api":
            return send(h, 200, registry.api_versions())
        if path == "/apis":
            return send(h, 200, registry.api_group_list())
        parts = path.strip("/").split("/")
        doc = None
        if parts[0] == "api" and len(parts) == 2:
            doc = registry.api_resource_list("", parts[1])
        elif parts[0] == "apis" and len(parts) == 2:
            doc = registry.api_group(parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            doc = registry.api_resource_list(parts[1], parts[2])
        if doc is None:
            raise errors.path_not_found()
        send(h, 200, doc)

    def _openapi(self, h, path: str) -> None:
        if path == "/openapi/v2":
            return send(h, 200, openapi.v2_document(self.registry))
        if path == "/openapi/v3":
            return send(h, 200, openapi.v3_index(self.registry))
        parts = path.split("/")[3:]
        doc = None
        if len(parts) == 2 and parts[0] == "api":
            doc = openapi.v3_document(self.registry, "", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = openapi.v3_document(self.registry, parts[1], parts[2])
        if doc is None:
            raise errors.path_not_found()
        send(h, 200, doc)

    # Resource requests -----------------------------------------------------------------------------------------

    def _serve(self, h, req: Request) -> None:
        store, rt = self.store, req.rt
        options = {"version": req.version}
        warnings: list[str] = []
        writing = {**options, "dry_run": req.dry_run, "strict": req.field_validation == "Strict",
                   "warnings": warnings}
        as_table = tables.wants_table(req.headers.get("Accept"))
        if req.verb == "get":
            if req.subresource == "log":
                return send(h, 200, store.get_log(req.namespace, req.name), "text/plain")
            obj = store.get(rt, req.namespace, req.name, **options)
            if as_table:
                return send(h, 200, self._table(req, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}))
            return send(h, 200, obj)
        if req.verb in ("list", "watch"):
            matcher = combine(label_selector(req.param("labelSelector")),
                              field_selector(req.param("fieldSelector"), rt, req.version))
            if req.verb == "watch":
                if req.name:
                    matcher = combine(matcher, field_selector(f"metadata.name={req.name}"))
                return self._watch(h, req, matcher)
            limit = int(req.param("limit") or 0) or None
            listing = store.list(rt, req.namespace, matcher, limit=limit, continue_=req.param("continue"), **options)
            if as_table:
                return send(h, 200, self._table(req, listing["items"], listing["metadata"]))
            return send(h, 200, listing)
        if req.verb == "create":
            if rt.namespaced and not req.namespace:
                raise errors.method_not_allowed(rt.plural, req.group)
            obj = self._object_body(req, kind_set=store.admission.sets_kind(rt))
            manager = self._manager(req)
            if obj.get("kind") and obj["kind"] != rt.kind:
                # A kind a webhook sets back: the field manager could not type the object as sent, so the create
                # records no managed fields (kube-apiserver logs that and writes the object without them).
                obj["kind"], manager = rt.kind, None
            result = store.create(rt, obj, req.namespace, **writing, manager=manager)
            return send(h, 201, result, warnings=self._warnings(req, warnings))
        if req.verb == "update":
            result = store.update(rt, self._object_body(req), req.namespace, req.name,
                                  subresource=req.subresource, **writing)
            return send(h, 200, result, warnings=self._warnings(req, warnings))
        if req.verb == "patch":
            content_type = (req.headers.get("Content-Type") or "").split(";")[0].strip()
            patch_type = PATCH_TYPES.get(content_type)
            if patch_type is None:
                raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                                                             f"accepted media types include: {', '.join(PATCH_TYPES)}")
            result = store.patch(rt, req.namespace, req.name, req.json_body(), patch_type,
                                 subresource=req.subresource, **writing)
            return send(h, 200, result, warnings=self._warnings(req, warnings))
        if req.verb == "apply":
            manager = req.param("fieldManager")
            if not manager:
                raise errors.bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: "
                                         "is required for apply patch")
            try:
                body = yaml.load(req.body or b"{}", Loader=_YAML_LOADER)
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"error decoding YAML: {exc}") from None
            result, created = store.apply(rt, req.namespace, req.name, body, manager,
                                          force=req.flag("force"), subresource=req.subresource,
                                          **writing)
            return send(h, 201 if created else 200, result, warnings=self._warnings(req, warnings))
        options_body = self._delete_options(req)
        dry_run = req.dry_run or "All" in (options_body.get("dryRun") or [])
        if req.verb == "delete":
            return send(h, 200, store.delete(rt, req.namespace, req.name, dry_run=dry_run,
                                             preconditions=options_body.get("preconditions"), **options))
        matcher = combine(label_selector(req.param("labelSelector")),
                          field_selector(req.param("fieldSelector"), rt, req.version))
        send(h, 200, store.delete_collection(rt, req.namespace, matcher, dry_run=dry_run, **options))

    @staticmethod
    def _table(req: Request, items: list[dict], meta: dict, headers: bool = True) -> dict:
        return tables.table(req.rt, req.version, items, meta, req.param("includeObject") or "Metadata", headers)

    @staticmethod
    def _object_body(req: Request, *, kind_set: bool = False) -> dict:
        """`kind_set`: a mutating webhook encodes the object again with its own kind (`Admission.sets_kind`), so a
        custom resource's other kind is left for the caller to set back."""
        obj = req.json_body()
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        kind, rt = obj.get("kind"), req.rt
        if kind and kind != rt.kind and not (kind_set and not rt.builtin):
            # A built-in kind's decoder knows no such kind; a custom resource is decoded as it is and refused by
            # its validation (apiextensions-apiserver customResourceValidator: "must be <Kind>").
            if rt.builtin:
                raise errors.bad_request(
                    f'{kind} in version "{req.version}" cannot be handled as a {rt.kind}: no kind "{kind}" is '
                    f'registered for version "{rt.api_version(req.version)}" in scheme "pkg/runtime/scheme.go:110"')
            name = (obj.get("metadata") or {}).get("name") or ""
            raise ApiError(422, "Invalid", f'{kind}.{rt.group} "{name}" is invalid: kind: Invalid value: "{kind}": '
                                           f"must be {rt.kind}", name=name, group=rt.group, kind=kind,
                           causes=[{"reason": "FieldValueInvalid", "message": f'Invalid value: "{kind}": must be '
                                                                              f"{rt.kind}", "field": "kind"}])
        return obj

    @staticmethod
    def _manager(req: Request) -> str:
        return manager_name(req.param("fieldManager"), req.headers.get("User-Agent"))

    @staticmethod
    def _delete_options(req: Request) -> dict:
        body = req.json_body() if req.body.strip() else None
        return body if isinstance(body, dict) else {}

    @staticmethod
    def _warnings(req: Request, warnings: list[str]) -> list[str]:
        return [] if req.field_validation == "Ignore" else warnings

    # Watch -----------------------------------------------------------------------------------------------------

    def _watch(self, h, req: Request, matcher) -> None:
        as_table = tables.wants_table(req.headers.get("Accept"))
        table = None
        if as_table:  # each event carries a one-row Table, the first with the column definitions
            def table(obj, first):
                return self._table(req, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}, headers=first)
        WatchStream(self, h, req, matcher, table).serve()

    # Control endpoints -----------------------------------------------------------------------------------------

    def _control(self, h, method: str, path: str, body: bytes) -> None:
        if path == "/_sandbox/healthz" and method == "GET":
            return send(h, 200, {"status": "ok"})
        if path == "/_sandbox/stats" and method == "GET":
            return send(h, 200, self.stats.snapshot())
        if path == "/_sandbox/stats/reset" and method == "POST":
            self.stats.reset()
            return send(h, 200, self.stats.snapshot())
        if path == "/_sandbox/faults":
            if method == "GET":
                return send(h, 200, {"faults": self.faults.list()})
            if method == "DELETE":
                self.faults.clear()
                return send(h, 200, {"faults": []})
            if method == "POST":
                try:
                    spec = json.loads(body or b"{}")
                    unknown = set(spec) - set(FIELDS)
                    if unknown:
                        raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
                    fault_id = self.faults.add(**spec)
                except (ValueError, TypeError) as exc:
                    raise errors.bad_request(str(exc)) from None
                return send(h, 201, self.faults.get(fault_id))
        if path == "/_sandbox/jobs" or path.startswith("/_sandbox/jobs/"):
            return self._jobs(h, method, path, body)
        if path.startswith("/_sandbox/faults/") and method == "DELETE":
            try:
                removed = self.faults.remove(int(path.rsplit("/", 1)[1]))
            except ValueError:
                removed = False
            if not removed:
                raise errors.path_not_found()
            return send(h, 200, {"faults": self.faults.list()})
        raise errors.path_not_found()


    def _jobs(self, h, method: str, path: str, body: bytes) -> None:
        """The job simulation: `GET /_sandbox/jobs` lists what it drives; `POST /_sandbox/jobs/<namespace>/<name>`
        with `duration`, `startup` and/or `outcome` changes how one job runs and ends."""
        if self.simulator is None:
            raise ApiError(404, "NotFound", "job simulation is off: start the sandbox with --simulate")
        parts = path.split("/")[3:]
        if method == "GET" and not parts:
            return send(h, 200, {"jobs": self.simulator.jobs()})
        if method != "POST" or len(parts) != 2:
            raise errors.path_not_found()
        try:
            spec = json.loads(body or b"{}")
            if not isinstance(spec, dict):
                raise ValueError("the body must be a JSON object")
            unknown = set(spec) - {"duration", "startup", "outcome"}
            if unknown:
                raise ValueError(f"unknown fields: {', '.join(sorted(unknown))}")
            return send(h, 200, self.simulator.plan(parts[0], parts[1], **spec))
        except ValueError as exc:
            raise errors.bad_request(str(exc)) from None
        except KeyError as exc:
            raise ApiError(404, "NotFound", exc.args[0]) from None


def send(h: BaseHTTPRequestHandler, code: int, body, content_type: str = "application/json",
         warnings: list[str] = ()) -> None:
    """One write per response (headers and body together) so Nagle's algorithm never delays a keep-alive client."""
    if isinstance(body, str) and content_type != "application/json":
        data = body.encode()
    else:
        data = json.dumps(body, separators=(",", ":")).encode()
    lines = [f"HTTP/1.1 {code} {HTTPStatus(code).phrase}", f"Content-Type: {content_type}",
             f"Content-Length: {len(data)}", "Cache-Control: no-cache, private"]
    lines += ["Warning: 299 - " + json.dumps(w) for w in warnings]
    if h.close_connection:
        lines.append("Connection: close")
    h.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the official client reuses its connections
    server_version = "sandbox"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self.connection)

    def finish(self):
        self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format, *args):  # noqa: A002 - the signature is BaseHTTPRequestHandler's
        pass

    def _dispatch(self):
        try:
            self.server.api.handle(self, self.command)
        except (ConnectionError, BrokenPipeError):
            self.close_connection = True
        except Exception as exc:  # an unexpected bug answers 500 instead of killing the connection silently
            with contextlib.suppress(OSError):
                send(self, 500, ApiError(500, "InternalError", f"sandbox error: {exc!r}").status())

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive handler threads are closed by `close_connections`, never joined
    allow_reuse_address = True

    def __init__(self, address, api: Api):
        self.api = api
        self.connections: set = set()
        super().__init__(address, Handler)

    def close_connections(self) -> None:
        """Drop open client connections so idle keep-alive handlers and watches end promptly."""
        self.api.stopping.set()
        self.api.store.wake_watchers()
        for conn in list(self.connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
