"""The Kubernetes gateway: the only module that imports the official `kubernetes` client.

Everything else passes plain dicts. A `ClusterClient` is built per cluster from how that cluster is reached
(a sandbox URL, a kubeconfig context or the pod's service account). Errors come out as `KubeError`, classified
transient (retry with backoff) or permanent (record and show), with the API server's own message kept.

The official client supplies what is hard to get right: kubeconfig and in-cluster configuration, TLS and
credentials (refreshed per request). Requests carry plain JSON over the connections its urllib3 pool opens: the
client's generic request path (parameter sanitising, deserialisation) and urllib3's own request and response layers
cost more client time than the API server took.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3
from django.conf import settings

from .kube_kinds import KINDS

TRANSIENT_STATUSES = {409, 429, 500, 502, 503, 504}
# Refusals that another object's convergence lifts (a scheduler's webhook judging an object against others as they
# are now): retried with backoff like a 503 rather than recorded as permanent. Each rule is registered by the code
# that knows the scheduler (rule(status, message) -> bool).
RETRIED_REFUSALS: list = []


class KubeError(Exception):
    """A failed call to a cluster: `status` is the HTTP code (0 when the server could not be reached)."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(f"{status} {reason}: {message}" if status else f"{reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    def __reduce__(self):
        # Celery pickles a task's exception; the default would call KubeError(text) and fail to unpickle.
        return (type(self), (self.status, self.reason, self.message))

    @property
    def transient(self) -> bool:
        return (self.status == 0 or self.status in TRANSIENT_STATUSES
                or any(rule(self.status, self.message) for rule in RETRIED_REFUSALS))


def quantity_units(value) -> int:
    """Whole units of a Kubernetes quantity ("16", "1k", "500m" → 0); 0 for what is not a quantity."""
    # Imported on first use, as in _api_client: the package loads the whole generated client.
    from kubernetes.utils import parse_quantity

    try:
        return int(parse_quantity(value))
    except (ValueError, TypeError):
        return 0


def quantity_float(value) -> float:
    """A Kubernetes quantity as a number, fractions kept ("1500m" → 1.5); 0 for what is not a quantity."""
    from kubernetes.utils import parse_quantity

    try:
        return float(parse_quantity(value))
    except (ValueError, TypeError):
        return 0.0


@dataclass(frozen=True)
class Connection:
    """How to reach one cluster; hashable so clients can be cached per connection."""

    mode: str  # "sandbox" | "kubeconfig" | "in_cluster"
    server: str = ""
    context: str = ""


def _error_from_response(status: int, reason: str, body: bytes) -> KubeError:
    """The API server's Status object, when the body is one, names the reason and says what went wrong."""
    message = body.decode(errors="replace") if body else reason
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, dict):
        reason = document.get("reason") or reason
        message = document.get("message") or message
    return KubeError(status, reason or "Error", message)


def path_for(api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
    try:
        spec = KINDS[(api_version, kind)]
    except KeyError:
        raise KubeError(400, "UnknownKind", f"the portal does not manage {kind} ({api_version})") from None
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if spec.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    path = f"{base}/{spec.plural}"
    return f"{path}/{name}" if name else path


class _Connections:
    """Keep-alive connections to one API server, each carrying one request at a time.

    The connections are the ones the official client's urllib3 pool would open (its TLS settings, certificates and
    hostname checks), but a request goes through `http.client` on them directly: urllib3's pool and response layers
    cost more client time per request than the API server spends answering it. `http.client` sends a request's
    headers and body in one write, so the server wakes once per request.
    """

    def __init__(self, pool, size: int, timeout: float):
        self._pool = pool
        self._size = size
        self._timeout = timeout
        self._idle: list = []
        self._lock = threading.Lock()

    def exchange(self, method: str, url: str, body: bytes | None, headers: dict) -> tuple[int, str, bytes]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._pool._new_conn()
            conn.timeout = self._timeout
        elif conn.sock is not None and not conn.is_connected:
            conn.close()  # closed by the server while idle: the request below opens it again
        try:
            http.client.HTTPConnection.request(conn, method, url, body, headers)
            response = http.client.HTTPConnection.getresponse(conn)
            result = response.status, response.reason, response.read()
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if len(self._idle) < self._size:
                self._idle.append(conn)
                return result
        conn.close()
        return result

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class ClusterClient:
    """Plain-dict operations against one cluster, and a small pool to run several of them at once."""

    def __init__(self, api_client, timeout: float, concurrency: int):
        self.api = api_client  # the official ApiClient: configuration, TLS connection pool, credentials
        self._host = api_client.configuration.host.rstrip("/")
        self._user_agent = api_client.user_agent
        self._timeout = timeout
        manager = api_client.rest_client.pool_manager
        # Through a proxy the pool manager's own request path sets up the tunnel or the proxy's URL form.
        self._proxied = manager if isinstance(manager, urllib3.ProxyManager) else None
        self._connections = _Connections(manager.connection_from_url(self._host), max(1, concurrency), timeout)
        self.concurrency = max(1, concurrency)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    def _request(self, method: str, path: str, *, query=None, body=None, content_type="application/json",
                 accept="application/json") -> bytes:
        headers = {"Accept": accept, "Content-Type": content_type, "User-Agent": self._user_agent}
        # Credentials are read for every request: a service-account token or an exec plugin's token rotates.
        self.api.update_params_for_auth(headers, [], ["BearerToken"])
        url = path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        try:
            # Retries are the reconciler's job (with backoff and a visible state), not the HTTP library's.
            if self._proxied is not None:
                response = self._proxied.request(method, self._host + url, body=data, headers=headers,
                                                 timeout=self._timeout, retries=False, redirect=False)
                status, reason, payload = response.status, response.reason, response.data
            else:
                status, reason, payload = self._connections.exchange(method, url, data, headers)
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            raise KubeError(0, "Unreachable", str(exc)) from exc
        if not 200 <= status < 300:
            raise _error_from_response(status, reason, payload)
        return payload

    def _call(self, method: str, path: str, *, query=None, body=None, content_type="application/json"):
        data = self._request(method, path, query=query, body=body, content_type=content_type)
        try:
            return json.loads(data) if data else None
        except ValueError as exc:
            raise KubeError(0, "BadResponse", f"{method} {path}: the API server's answer is not JSON") from exc

    def apply(self, obj: dict, *, field_manager: str | None = None, dry_run: bool = False) -> dict:
        """Server-side apply with the portal's field manager and force: the portal owns what it declares."""
        meta = obj["metadata"]
        query = [("fieldManager", field_manager or settings.KUBE_FIELD_MANAGER), ("force", "true")]
        if dry_run:
            query.append(("dryRun", "All"))
        path = path_for(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        return self._call("PATCH", path, query=query, body=obj, content_type="application/apply-patch+yaml")

    def apply_status(self, obj: dict, *, field_manager: str | None = None) -> dict:
        """Server-side apply of an object's status (its `status` subresource), as a controller writes it: the
        portal owns only the fields it declares (an entry of a list map, a condition)."""
        meta = obj["metadata"]
        query = [("fieldManager", field_manager or settings.KUBE_FIELD_MANAGER), ("force", "true")]
        path = path_for(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]) + "/status"
        return self._call("PATCH", path, query=query, body=obj, content_type="application/apply-patch+yaml")

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self._call("GET", path_for(api_version, kind, namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(
        self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str = "",
        field_selector: str = "",
    ) -> list[dict]:
        return self.list_versioned(api_version, kind, namespace=namespace, label_selector=label_selector,
                                   field_selector=field_selector)[0]

    def list_versioned(
        self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str = "",
        field_selector: str = "",
    ) -> tuple[list[dict], str]:
        """The items and the list's resourceVersion (where a watch of the same objects goes on from)."""
        query = _selectors(label_selector, field_selector)
        try:
            result = self._call("GET", path_for(api_version, kind, namespace), query=query)
        except KubeError as exc:
            # A custom kind whose CRD is not installed lists as nothing: there is nothing of ours to find.
            if exc.status == 404 and (api_version, kind) in KINDS and "/" in api_version:
                return [], ""
            raise
        items = (result or {}).get("items") or []
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items, ((result or {}).get("metadata") or {}).get("resourceVersion", "")

    def watch(self, api_version: str, kind: str, *, resource_version: str, label_selector: str = "",
              field_selector: str = "", timeout_seconds: int = 300):
        """A watch of every namespace from `resource_version`, bookmarks allowed: iterate the stream for its events
        (dicts with `type` and `object`); an ERROR event (410 Expired, too large a resourceVersion) raises its
        `KubeError`, a broken connection `KubeError(0, "Unreachable")`. `close()` ends it from another thread."""
        query = _selectors(label_selector, field_selector) + [
            ("watch", "true"), ("allowWatchBookmarks", "true"), ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds))]
        headers = {"Accept": "application/json", "User-Agent": self._user_agent}
        self.api.update_params_for_auth(headers, [], ["BearerToken"])
        url = self._host + path_for(api_version, kind) + f"?{urlencode(query)}"
        try:
            # The official client's pool manager (proxies included): a watch holds its connection for a long time.
            response = self.api.rest_client.pool_manager.request(
                "GET", url, headers=headers, retries=False, redirect=False, preload_content=False,
                timeout=urllib3.Timeout(connect=self._timeout, read=timeout_seconds + 30))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(0, "Unreachable", str(exc)) from exc
        if not 200 <= response.status < 300:
            raise _error_from_response(response.status, response.reason, response.read())
        from .kube_watch import WatchStream

        return WatchStream(response)

    def list_all(self, queries: Iterable[tuple[str, str, str | None, str]]) -> list[dict]:
        """Every object of several lists, each `(api_version, kind, namespace, label_selector)`, read side by side;
        the first list that fails raises its error."""
        results = self.each(lambda q: self.list(q[0], q[1], namespace=q[2], label_selector=q[3]), queries)
        error = next((result for result in results if isinstance(result, KubeError)), None)
        if error is not None:
            raise error
        return [obj for items in results for obj in items]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete in the background; False when it was already gone."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        try:
            self._call("DELETE", path_for(api_version, kind, namespace, name), body=body)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def pod_log(self, namespace: str, name: str, *, tail_lines: int | None = 50) -> str:
        """The pod's log: its last `tail_lines` lines, or all of it with None (the download)."""
        query = [("tailLines", str(tail_lines))] if tail_lines is not None else []
        data = self._request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}/log", query=query, accept="text/plain")
        return data.decode(errors="replace")

    def reachable(self) -> tuple[bool, str]:
        try:
            version = self._call("GET", "/version")
        except KubeError as exc:
            return False, str(exc)
        return True, (version or {}).get("gitVersion", "")

    def each(self, call: Callable[[Any], Any], items: Iterable) -> list:
        """`call(item)` for every item, up to `concurrency` at a time on this cluster (as a controller's workers
        do); results in the items' order, a `KubeError` in place of the result of a call that raised one.

        Any other exception is a bug, not a cluster's answer: it is raised once every call has finished.
        """
        items = list(items)
        if len(items) <= 1 or self.concurrency == 1:
            return [_result_or_error(call, item) for item in items]
        # A few workers each take the next item until none is left: one task per worker, not one per item.
        results: list = [None] * len(items)
        bugs: list[Exception] = []
        pending = iter(enumerate(items))
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    index, item = next(pending, (None, None))
                if index is None:
                    return
                try:
                    results[index] = _result_or_error(call, item)
                except Exception as exc:  # noqa: BLE001 - raised below, once every call has finished
                    bugs.append(exc)

        for worker in [self._workers().submit(work) for _ in range(min(self.concurrency, len(items)))]:
            worker.result()
        if bugs:
            raise bugs[0]
        return results

    def _workers(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="kube")
            return self._executor

    def close(self) -> None:
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
        self._connections.close()
        self.api.close()


def _selectors(label_selector: str, field_selector: str) -> list[tuple[str, str]]:
    query = [("labelSelector", label_selector)] if label_selector else []
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _result_or_error(call: Callable[[Any], Any], item):
    try:
        return call(item)
    except KubeError as exc:
        return exc


_clients: dict[Connection, ClusterClient] = {}
_clients_lock = threading.Lock()


def _api_client(conn: Connection):
    """The official client for one connection.

    `kubernetes` is imported here, when a process first talks to a cluster, rather than at start-up: importing it
    loads its several hundred generated model modules (over a second of CPU), which a migrate, a web server's
    start or a worker that never reconciles does not need.
    """
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    if conn.mode == "sandbox":
        configuration = k8s.Configuration(host=conn.server)
        configuration.api_key = {"authorization": "Bearer sandbox"}
    elif conn.mode in ("kubeconfig", "in_cluster"):
        configuration = k8s.Configuration()
        try:
            if conn.mode == "kubeconfig":
                k8s_config.load_kube_config(config_file=settings.KUBECONFIG or None,
                                            context=conn.context or None, client_configuration=configuration)
            else:
                k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException as exc:
            raise KubeError(400, "BadConnection", str(exc)) from exc
    else:
        raise KubeError(400, "BadConnection", f"unknown connection mode {conn.mode!r}")
    configuration.retries = False
    # One connection per worker, so concurrent requests to a cluster never wait for a free connection.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, settings.KUBE_CONCURRENCY)
    return k8s.ApiClient(configuration)


def client_for(conn: Connection) -> ClusterClient:
    with _clients_lock:
        cached = _clients.get(conn)
        if cached is None:
            cached = ClusterClient(_api_client(conn), settings.KUBE_REQUEST_TIMEOUT, settings.KUBE_CONCURRENCY)
            _clients[conn] = cached
        return cached


def client_for_cluster(cluster) -> ClusterClient:
    """Client for anything with `connection`, `server` and `context` attributes (a Cluster row)."""
    return client_for(Connection(mode=cluster.connection, server=cluster.server, context=cluster.context))


def forget_clients() -> None:
    """Drop cached clients (tests start a fresh sandbox per test)."""
    with _clients_lock:
        for cached in _clients.values():
            cached.close()
        _clients.clear()
