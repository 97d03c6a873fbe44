"""The OpenAPI documents kubectl reads: `/openapi/v3` (the index), `/openapi/v3/<api|apis/group>/<version>` and
`/openapi/v2`, built from the same schemas the sandbox validates with (kubernetes-validate's definitions for core
kinds, the CRDs' openAPIV3Schema for custom kinds).

kubectl needs from them: paths whose PATCH operation carries `x-kubernetes-group-version-kind` and lists the
`fieldValidation` parameter (its check that the server validates fields itself, so `apply`/`create` send
fieldValidation=Strict instead of validating client-side), and component schemas tagged with their group, version
and kind (`kubectl explain`).
"""

from __future__ import annotations

import hashlib
import json
import threading

from . import upstream
from .kinds import Registry, ResourceType
from .validation import _core_definitions

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "pretty")
_lock = threading.Lock()
_gvk_index: dict[tuple, str] = {}


def _param(name: str) -> dict:
    return {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}


def _convert(node, ref_prefix: str):
    """JSON Schema (kubernetes-validate's form) back to OpenAPI: nullable type lists folded, refs re-pointed."""
    if isinstance(node, list):
        return [_convert(item, ref_prefix) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = ref_prefix + value.rsplit("/", 1)[1]
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out[key] = types[0] if len(types) == 1 else "string"
        elif key == "enum":
            continue  # kubernetes-validate pins apiVersion/kind; an API server's schema does not
        else:
            out[key] = _convert(value, ref_prefix)
    return out


def _definition_for(rt: ResourceType, version: str) -> str | None:
    with _lock:
        if not _gvk_index:
            _, definitions = _core_definitions()
            for name, schema in definitions.items():
                for gvk in schema.get("x-kubernetes-group-version-kind") or ():
                    _gvk_index[(gvk.get("group", ""), gvk.get("version"), gvk.get("kind"))] = name
    return _gvk_index.get((rt.group, version, rt.kind))


def _closure(names: list[str], definitions: dict) -> set[str]:
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        text = json.dumps(definitions[name])
        for part in text.split('"$ref": "')[1:]:
            stack.append(part.split('"', 1)[0].rsplit("/", 1)[1])
    return seen


def _crd_schema_name(rt: ResourceType, version: str) -> str:
    return ".".join(reversed(rt.group.split("."))) + f".{version}.{rt.kind}"


def _schemas(types: list[ResourceType], version: str, ref_prefix: str) -> dict:
    _, definitions = _core_definitions()
    core = [n for n in (_definition_for(rt, version) for rt in types if rt.builtin) if n]
    out = {name: _convert(definitions[name], ref_prefix) for name in _closure([*core, _OBJECT_META], definitions)}
    for rt in types:
        if rt.builtin:
            continue
        schema = json.loads(json.dumps(rt.crd_schemas.get(version) or {}))
        schema.setdefault("properties", {})["metadata"] = {"$ref": ref_prefix + _OBJECT_META}
        schema["x-kubernetes-group-version-kind"] = [{"group": rt.group, "version": version, "kind": rt.kind}]
        out[_crd_schema_name(rt, version)] = schema
    return out


def _paths(types: list[ResourceType], group: str, version: str, ref_prefix: str) -> dict:
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    paths = {}
    for rt in types:
        gvk = {"group": rt.group, "version": version, "kind": rt.kind}
        name = _definition_for(rt, version) if rt.builtin else _crd_schema_name(rt, version)
        body = {"content": {"application/json": {"schema": {"$ref": ref_prefix + (name or _OBJECT_META)}}}}
        collection = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"

        def op(verb: str, params=(), with_body=False, kind=rt.kind, gvk=gvk, body=body):
            entry = {"operationId": f"{verb}{kind}", "x-kubernetes-action": verb,
                     "x-kubernetes-group-version-kind": gvk, "parameters": [_param(p) for p in params],
                     "responses": {"200": body}}
            if with_body:
                entry["requestBody"] = body
            return entry

        paths[collection] = {"get": op("list", ("labelSelector", "fieldSelector", "limit", "continue", "watch")),
                             "post": op("post", _WRITE_PARAMS, True)}
        paths[f"{collection}/{{name}}"] = {
            "get": op("get"), "put": op("put", _WRITE_PARAMS, True), "delete": op("delete", ("dryRun",)),
            "patch": op("patch", (*_WRITE_PARAMS, "force"), True)}
    return paths


def _types(registry: Registry, group: str, version: str) -> list[ResourceType]:
    return sorted((rt for rt in registry.by_key.values() if rt.group == group and version in rt.versions),
                  key=lambda rt: rt.plural)


def v3_index(registry: Registry) -> dict:
    paths = {}
    for group, versions in sorted(registry.group_versions().items()):
        for version in versions:
            path = f"apis/{group}/{version}" if group else f"api/{version}"
            digest = hashlib.sha256(json.dumps([rt.plural for rt in _types(registry, group, version)])
                                    .encode()).hexdigest()[:16].upper()
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def v3_document(registry: Registry, group: str, version: str) -> dict | None:
    types = _types(registry, group, version)
    if not types:
        return None
    prefix = "#/components/schemas/"
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": upstream.KUBERNETES},
            "paths": _paths(types, group, version, prefix),
            "components": {"schemas": _schemas(types, version, prefix)}}


def v2_document(registry: Registry) -> dict:
    prefix = "#/definitions/"
    definitions, paths = {}, {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            types = _types(registry, group, version)
            definitions.update(_schemas(types, version, prefix))
            for path, ops in _paths(types, group, version, prefix).items():
                paths[path] = {verb: {**{k: v for k, v in op.items() if k not in ("requestBody", "responses")},
                                      "parameters": [{"name": p["name"], "in": "query", "type": "string"}
                                                     for p in op["parameters"]],
                                      "responses": {"200": {"description": "OK"}}}
                               for verb, op in ops.items()}
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": upstream.KUBERNETES}, "paths": paths,
            "definitions": definitions}
