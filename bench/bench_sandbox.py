"""The sandbox API server: creates and unchanged server-side applies through the official client, against an
in-process sandbox and a standalone one, compared with a bare keep-alive HTTP client (the floor)."""

import http.client
import json
import time
from urllib.parse import urlsplit

from bench.support import standalone_sandbox, table

CREATES = 600
APPLIES = 600


def _config_map(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"bench": "yes"}},
            "data": {"key": "value"}}


def _client_creates(api, prefix: str) -> float:
    from kubernetes import client

    core = client.CoreV1Api(api)
    started = time.perf_counter()
    for i in range(CREATES):
        core.create_namespaced_config_map("default", _config_map(f"{prefix}-{i}"))
    return CREATES / (time.perf_counter() - started)


def _client_applies(api, name: str) -> float:
    path = f"/api/v1/namespaces/default/configmaps/{name}"
    query = [("fieldManager", "bench"), ("force", "true")]
    headers = {"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"}
    api.call_api(path, "PATCH", query_params=query, header_params=headers, body=_config_map(name))
    started = time.perf_counter()
    for _ in range(APPLIES):
        api.call_api(path, "PATCH", query_params=query, header_params=headers, body=_config_map(name),
                     response_type="object", _return_http_data_only=True)
    return APPLIES / (time.perf_counter() - started)


def _raw_creates(url: str, prefix: str) -> float:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    started = time.perf_counter()
    for i in range(CREATES):
        conn.request("POST", "/api/v1/namespaces/default/configmaps", json.dumps(_config_map(f"{prefix}-{i}")),
                     headers)
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            raise RuntimeError(f"floor create failed: {response.status}")
    elapsed = time.perf_counter() - started
    conn.close()
    return CREATES / elapsed


def _measure(url: str, api) -> dict:
    return {"floor": _raw_creates(url, "raw"), "creates": _client_creates(api, "client"),
            "applies": _client_applies(api, "applied")}


def run() -> str:
    from sandbox import Sandbox
    from sandbox.testing import api_client

    with Sandbox() as sb:
        api = api_client(sb)
        in_process = _measure(sb.url, api)
        writes_before = sb.stats()["writes"]
        _client_applies(api, "applied")
        noop_writes = sb.stats()["writes"] - writes_before
        api.close()
    with standalone_sandbox() as url:
        api = api_client(url)
        standalone = _measure(url, api)
        api.close()

    rows = []
    for label, key in (("ConfigMap creates, bare http.client keep-alive (floor)", "floor"),
                       ("ConfigMap creates, official client", "creates"),
                       ("server-side apply of an unchanged ConfigMap, official client", "applies")):
        rows.append([label, f"{in_process[key]:,.0f}/s", f"{in_process[key] / in_process['floor']:.2f}",
                     f"{standalone[key]:,.0f}/s", f"{standalone[key] / standalone['floor']:.2f}"])
    return "\n\n".join([
        "## Sandbox API server",
        f"{CREATES} ConfigMap creates and {APPLIES} unchanged server-side applies, sequential, one keep-alive "
        "connection, against a sandbox in this process (a server thread) and a standalone `python -m sandbox serve` "
        f"process. Ratios are to the bare-HTTP floor on the same server. The repeated applies stored "
        f"{noop_writes} writes (an unchanged apply is not a write).",
        table(["operation", "in-process", "× floor", "standalone", "× floor"], rows),
    ])
