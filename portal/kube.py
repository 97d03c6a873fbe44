"""The Kubernetes gateway: the only module that imports the official `kubernetes` client.

Everything else passes plain dicts. A `ClusterClient` is built per cluster from how that cluster is reached
(a sandbox URL, a kubeconfig context or the pod's service account). Errors come out as `KubeError`, classified
transient (retry with backoff) or permanent (record and show), with the API server's own message kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import urllib3
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.utils import parse_quantity

TRANSIENT_STATUSES = {409, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class Kind:
    plural: str
    namespaced: bool


# Every kind the portal reads or writes. A static table keeps the gateway free of discovery round-trips and
# documents exactly what the portal's ClusterRole must allow.
KINDS: dict[tuple[str, str], Kind] = {
    ("v1", "Namespace"): Kind("namespaces", False),
    ("v1", "ResourceQuota"): Kind("resourcequotas", True),
    ("v1", "LimitRange"): Kind("limitranges", True),
    ("v1", "Service"): Kind("services", True),
    ("v1", "Pod"): Kind("pods", True),
    ("v1", "Event"): Kind("events", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): Kind("rolebindings", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): Kind("networkpolicies", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): Kind("priorityclasses", False),
    ("batch/v1", "Job"): Kind("jobs", True),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): Kind("resourceflavors", False),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): Kind("clusterqueues", False),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): Kind("localqueues", True),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"): Kind("workloadpriorityclasses", False),
    ("kueue.x-k8s.io/v1beta2", "Cohort"): Kind("cohorts", False),
    ("kueue.x-k8s.io/v1beta2", "Workload"): Kind("workloads", True),
    ("scheduling.volcano.sh/v1beta1", "Queue"): Kind("queues", False),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): Kind("podgroups", True),
    ("batch.volcano.sh/v1alpha1", "Job"): Kind("jobs", True),
    ("ray.io/v1", "RayJob"): Kind("rayjobs", True),
}


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
        return self.status == 0 or self.status in TRANSIENT_STATUSES


def quantity_units(value) -> int:
    """Whole units of a Kubernetes quantity ("16", "1k", "500m" → 0); 0 for what is not a quantity."""
    try:
        return int(parse_quantity(value))
    except (ValueError, TypeError):
        return 0


@dataclass(frozen=True)
class Connection:
    """How to reach one cluster; hashable so clients can be cached per connection."""

    mode: str  # "sandbox" | "kubeconfig" | "in_cluster"
    server: str = ""
    context: str = ""


def _error_from_api_exception(exc: k8s.ApiException) -> KubeError:
    import json

    reason, message = exc.reason or "Error", str(exc.body or exc.reason or "")
    try:
        body = json.loads(exc.body or "")
        reason = body.get("reason") or reason
        message = body.get("message") or message
    except (TypeError, ValueError):
        pass
    return KubeError(exc.status or 0, reason, message)


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


class ClusterClient:
    """Plain-dict operations against one cluster."""

    def __init__(self, api_client: k8s.ApiClient, timeout: tuple[float, float]):
        self.api = api_client
        self.timeout = timeout

    def _call(self, method: str, path: str, *, query=None, body=None, content_type="application/json"):
        try:
            return self.api.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                response_type="object",
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=True,
                _request_timeout=self.timeout,
            )
        except k8s.ApiException as exc:
            raise _error_from_api_exception(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(0, "Unreachable", str(exc)) from exc

    def apply(self, obj: dict, *, field_manager: str | None = None, dry_run: bool = False) -> dict:
        """Server-side apply with the portal's field manager and force: the portal owns what it declares."""
        meta = obj["metadata"]
        query = [("fieldManager", field_manager or settings.KUBE_FIELD_MANAGER), ("force", "true")]
        if dry_run:
            query.append(("dryRun", "All"))
        path = path_for(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
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
        query = [("labelSelector", label_selector)] if label_selector else []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        try:
            result = self._call("GET", path_for(api_version, kind, namespace), query=query)
        except KubeError as exc:
            # A custom kind whose CRD is not installed lists as nothing: there is nothing of ours to find.
            if exc.status == 404 and (api_version, kind) in KINDS and "/" in api_version:
                return []
            raise
        items = result.get("items") or []
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

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

    def pod_log(self, namespace: str, name: str, *, tail_lines: int = 50) -> str:
        try:
            return self.api.call_api(
                f"/api/v1/namespaces/{namespace}/pods/{name}/log", "GET",
                query_params=[("tailLines", str(tail_lines))], header_params={"Accept": "text/plain"},
                response_type="str", auth_settings=["BearerToken"], _return_http_data_only=True,
                _preload_content=True, _request_timeout=self.timeout,
            ) or ""
        except k8s.ApiException as exc:
            raise _error_from_api_exception(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(0, "Unreachable", str(exc)) from exc

    def reachable(self) -> tuple[bool, str]:
        try:
            version = self._call("GET", "/version")
        except KubeError as exc:
            return False, str(exc)
        return True, (version or {}).get("gitVersion", "")


_clients: dict[Connection, ClusterClient] = {}
_clients_lock = threading.Lock()


def _configuration(conn: Connection) -> k8s.Configuration:
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
    # Retries are the reconciler's job (with backoff and a visible state), not the HTTP library's.
    configuration.retries = False
    return configuration


def client_for(conn: Connection) -> ClusterClient:
    with _clients_lock:
        cached = _clients.get(conn)
        if cached is None:
            timeout = settings.KUBE_REQUEST_TIMEOUT  # the client honours floats only as a (connect, read) pair
            cached = ClusterClient(k8s.ApiClient(_configuration(conn)), (timeout, timeout))
            _clients[conn] = cached
        return cached


def client_for_cluster(cluster) -> ClusterClient:
    """Client for anything with `connection`, `server` and `context` attributes (a Cluster row)."""
    return client_for(Connection(mode=cluster.connection, server=cluster.server, context=cluster.context))


def forget_clients() -> None:
    """Drop cached clients (tests start a fresh sandbox per test)."""
    with _clients_lock:
        for cached in _clients.values():
            cached.api.close()
        _clients.clear()
