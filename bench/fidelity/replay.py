"""Send a case's requests to one API server and reduce each answer to what is compared: the status code, the
reason, the causes (field path and message) and the object with what differs by nature (uid, resourceVersion,
times) normalised."""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

# Metadata every server fills in its own way (identity, versions, clocks): compared only as present or absent.
VOLATILE_METADATA = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generateName")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TIME_KEYS = ("lastTransitionTime", "lastUpdateTime", "lastProbeTime", "time", "startTime", "completionTime")


@dataclass
class Target:
    name: str
    base: str
    token: str = "sandbox"
    ssl_context: ssl.SSLContext | None = None

    def send(self, method: str, path: str, body=None, content_type: str = "application/json",
             timeout: float = 30) -> tuple[int, dict]:
        data = None if body is None else (body if isinstance(body, bytes) else
                                          body.encode() if isinstance(body, str) else json.dumps(body).encode())
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw) if raw else {}
        except ValueError:
            return status, {"text": raw.decode(errors="replace")[:200]}


def _normalise(value):
    if isinstance(value, dict):
        out = {}
        for key, child in value.items():
            if key in TIME_KEYS and isinstance(child, str):
                out[key] = "<time>"
            else:
                out[key] = _normalise(child)
        return out
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def reduce(status: int, body: dict) -> dict:
    """What is compared of one answer."""
    if body.get("kind") == "Status" or status >= 300:
        details = body.get("details") or {}
        causes = sorted([c.get("field", ""), c.get("reason", ""), c.get("message", "")]  # lists, as JSON keeps them
                        for c in details.get("causes") or [])
        return {"code": status, "reason": body.get("reason", ""), "message": body.get("message", ""),
                "causes": causes}
    meta = body.get("metadata") or {}
    raw = json.dumps(body)
    if meta.get("uid"):  # the uid, wherever a server copies it
        raw = raw.replace(f'"{meta["uid"]}"', '"<uid>"')
    generated, prefix = meta.get("name", ""), meta.get("generateName")
    if prefix and generated.startswith(prefix):  # a generated name's random suffix, wherever it is copied
        raw = raw.replace(f'"{generated}"', f'"{prefix}<random>"')
    elif UUID.match(generated):  # a name the registry made up (a LimitRange without one)
        raw = raw.replace(f'"{generated}"', '"<uuid>"')
    obj = json.loads(raw)
    if obj.get("kind", "").endswith("List"):
        return {"code": status, "kind": obj["kind"], "items": len(obj.get("items") or [])}
    meta = obj.get("metadata") or {}
    for key in VOLATILE_METADATA:
        if key in meta:
            meta[key] = "<set>"
    for entry in meta.get("managedFields") or []:
        entry.pop("time", None)
    return {"code": status, "object": _normalise(obj)}


def differences(a, b, path: str = "", out: list | None = None, limit: int = 8) -> list[str]:
    """The first paths at which two reduced answers differ (`a` the API server's, `b` the sandbox's)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a:
                out.append(f"{path}.{key}: only in the sandbox's answer: {json.dumps(b[key])[:120]}")
            elif key not in b:
                out.append(f"{path}.{key}: only in the API server's answer: {json.dumps(a[key])[:120]}")
            else:
                differences(a[key], b[key], f"{path}.{key}", out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            differences(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: {json.dumps(a)[:160]} vs {json.dumps(b)[:160]}")
    return out[:limit]
