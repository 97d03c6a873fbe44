"""The protobuf request bodies kubectl's imperative `create` commands send, for the kinds they make most often.

kube-apiserver decodes `application/vnd.kubernetes.protobuf` for every built-in kind from the generated Go types
(k8s.io/api/*/generated.proto). The sandbox keeps the fields of the few kinds `kubectl create namespace |
configmap | secret | serviceaccount | quota | priorityclass` send, by their field numbers in those .proto files:
the envelope (runtime.Unknown: 1 typeMeta {1 apiVersion, 2 kind}, 2 raw), ObjectMeta (1 name, 2 generateName,
3 namespace, 11 labels, 12 annotations, 14 finalizers) and each kind's own fields. Anything else is answered 415.
"""

from __future__ import annotations

import base64

MAGIC = b"k8s\x00"

_META = {1: ("name", "s"), 2: ("generateName", "s"), 3: ("namespace", "s"), 11: ("labels", "map"),
         12: ("annotations", "map"), 14: ("finalizers", "list")}
_KINDS = {
    ("v1", "Namespace"): {1: ("metadata", _META), 2: ("spec", {1: ("finalizers", "list")})},
    ("v1", "ConfigMap"): {1: ("metadata", _META), 2: ("data", "map"), 3: ("binaryData", "bytesmap"),
                          4: ("immutable", "bool")},
    ("v1", "Secret"): {1: ("metadata", _META), 2: ("data", "bytesmap"), 3: ("type", "s"), 4: ("stringData", "map"),
                       5: ("immutable", "bool")},
    ("v1", "ServiceAccount"): {1: ("metadata", _META), 4: ("automountServiceAccountToken", "bool")},
    ("v1", "ResourceQuota"): {1: ("metadata", _META), 2: ("spec", {1: ("hard", "quantities"), 2: ("scopes", "list")})},
    ("scheduling.k8s.io/v1", "PriorityClass"): {1: ("metadata", _META), 2: ("value", "int"),
                                                3: ("globalDefault", "bool"), 4: ("description", "s"),
                                                5: ("preemptionPolicy", "s")},
}


class Unsupported(ValueError):
    """A protobuf body the sandbox cannot read (not the envelope, or a kind it keeps no field numbers for)."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise Unsupported("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited fields."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = int.from_bytes(data[pos:pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos:pos + 4], "little"), pos + 4
        else:
            raise Unsupported(f"wire type {wire}")
        out.append((number, value))
    return out


def _entry(raw: bytes) -> tuple[str, bytes]:
    parts = dict(fields(raw))
    return parts.get(1, b"").decode(), parts.get(2, b"")


def _message(raw: bytes, schema: dict) -> dict:
    out: dict = {}
    for number, value in fields(raw):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, dict):
            nested = _message(value, kind)
            if nested:
                out[name] = nested
        elif kind == "s":
            if value:
                out[name] = value.decode()
        elif kind == "int":
            out[name] = value - (1 << 64) if value >= 1 << 63 else value
        elif kind == "bool":
            if value:
                out[name] = True
        elif kind == "list":
            out.setdefault(name, []).append(value.decode())
        elif kind == "map":
            key, item = _entry(value)
            out.setdefault(name, {})[key] = item.decode()
        elif kind == "bytesmap":
            key, item = _entry(value)
            out.setdefault(name, {})[key] = base64.b64encode(item).decode()
        elif kind == "quantities":
            key, item = _entry(value)
            out.setdefault(name, {})[key] = dict(fields(item)).get(1, b"").decode()
    return out


def decode(body: bytes) -> dict:
    """The object in a `application/vnd.kubernetes.protobuf` body, as JSON would carry it."""
    if not body.startswith(MAGIC):
        raise Unsupported("the body does not start with the protobuf envelope's magic bytes")
    envelope = dict(fields(body[len(MAGIC):]))
    type_meta = dict(fields(envelope.get(1, b"")))
    api_version, kind = type_meta.get(1, b"").decode(), type_meta.get(2, b"").decode()
    schema = _KINDS.get((api_version, kind))
    if schema is None:
        raise Unsupported(f"{kind} in {api_version}")
    return {"apiVersion": api_version, "kind": kind, **_message(envelope.get(2, b""), schema)}
