"""Objects of built-in kinds as their Go types hold them: kube-apiserver decodes a written object into its Go
struct and encodes it back, so a struct field that is not a pointer is always there (`"status": {}`), and an
empty map, list or string whose field is `omitempty` is gone (`"hard": {}`, `"env": []`), and a quantity is written as
Quantity.String() writes it (`1.5` → `1500m`, `1024Gi` → `1Ti`; k8s.io/apimachinery pkg/api/resource/quantity.go).
Custom resources are kept as written (unstructured).

`EMPTY_OBJECTS` is what the Go type of each built-in kind the sandbox serves holds when empty
(runtime.DefaultUnstructuredConverter, k8s.io/apimachinery pkg/runtime/converter.go: structs that are not pointers,
and the fields without `omitempty`, nil slices as null); beside the encoding it decides which maps a create adds
(`sandbox.managed_update`). Which fields are `omitempty` is read from the kind's OpenAPI schema: openapi-gen lists a
field as `required` exactly when it has no `omitempty`."""

from __future__ import annotations

from .fieldpath import field_schema, items_schema, resolved
from .quantity import canonical

_POD_SPEC = {"containers": None}
_ROLE_REF = {"apiGroup": "", "kind": "", "name": ""}
EMPTY_OBJECTS: dict[tuple[str, str], dict] = {
    ("", "Namespace"): {"spec": {}, "status": {}},
    ("", "ResourceQuota"): {"spec": {}, "status": {}},
    ("", "LimitRange"): {"spec": {"limits": None}},
    ("", "Service"): {"spec": {}, "status": {"loadBalancer": {}}},
    ("", "Pod"): {"spec": _POD_SPEC, "status": {}},
    ("", "PersistentVolumeClaim"): {"spec": {"resources": {}}, "status": {}},
    ("batch", "Job"): {"spec": {"template": {"metadata": {}, "spec": _POD_SPEC}}, "status": {}},
    ("scheduling.k8s.io", "PriorityClass"): {"value": 0},
    ("rbac.authorization.k8s.io", "RoleBinding"): {"roleRef": _ROLE_REF},
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): {"roleRef": _ROLE_REF},
    ("networking.k8s.io", "NetworkPolicy"): {"spec": {"podSelector": {}}},
    ("resource.k8s.io", "ResourceClaimTemplate"): {"spec": {"metadata": {}, "spec": {"devices": {}}}},
    ("resource.k8s.io", "ResourceClaim"): {"spec": {"devices": {}}, "status": {}},
}


# Plain (not pointer) `omitempty` booleans: false is not written back.
_PLAIN_BOOLS = {("scheduling.k8s.io", "PriorityClass"): (("globalDefault",),),
                ("", "Service"): (("spec", "publishNotReadyAddresses"),)}


def _drop_false(obj: dict, paths) -> None:
    for path in paths:
        node = obj
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(path[-1]) is False:
            del node[path[-1]]


def empty_object(rt) -> dict:
    return {"metadata": {}, **EMPTY_OBJECTS.get(rt.key, {})} if rt.builtin else {}


def _add_structs(obj: dict, skeleton: dict) -> None:
    for key, value in skeleton.items():
        if isinstance(value, dict):
            if key not in obj:
                obj[key] = {}
            if isinstance(obj[key], dict):
                _add_structs(obj[key], value)


# Structs inside a kind that are not pointers, found by the properties of their parent's schema (a container's
# `resources`).
_NESTED_STRUCTS = ((frozenset({"image", "terminationMessagePolicy"}), ("resources",)),)


def _add_nested_structs(node, schema) -> None:
    if isinstance(node, list):
        for item in node:
            _add_nested_structs(item, items_schema(schema))
        return
    if not isinstance(node, dict):
        return
    declared = resolved(schema)
    properties = set((declared or {}).get("properties") or ()) if isinstance(declared, dict) else set()
    for signature, keys in _NESTED_STRUCTS:
        if signature <= properties:
            for key in keys:
                node.setdefault(key, {})
    for key, child in node.items():
        if isinstance(child, dict | list):
            _add_nested_structs(child, field_schema(schema, key))


def _is_map(schema) -> bool:
    node = resolved(schema)
    return isinstance(node, dict) and "properties" not in node and isinstance(node.get("additionalProperties"), dict)


_QUANTITY = [{"type": ["string", "null"]}, {"type": ["number", "null"]}]  # resource.Quantity's published schema


def _is_quantity(schema) -> bool:
    return isinstance(schema, dict) and schema.get("oneOf") == _QUANTITY


def _quantity(value):
    try:
        return canonical(value)
    except ValueError:
        return value


def _normalise(node, schema) -> None:
    """Drop empty `omitempty` maps, lists and strings; write quantities as Quantity.String() does."""
    if isinstance(node, list):
        items = items_schema(schema)
        for i, item in enumerate(node):
            if _is_quantity(items):
                node[i] = _quantity(item)
            _normalise(item, items)
        return
    if not isinstance(node, dict):
        return
    declared = resolved(schema)
    required = set((declared or {}).get("required") or ()) if isinstance(declared, dict) else set()
    extra = declared.get("additionalProperties") if isinstance(declared, dict) else None
    for key in required - set(node):  # a missing number or boolean decodes to its zero value, written back
        kind = (field_schema(schema, key) or {}).get("type")
        kinds = set(kind) if isinstance(kind, list) else {kind}
        if kinds & {"integer", "number"}:
            node[key] = 0
        elif "boolean" in kinds:
            node[key] = False
    for key in list(node):
        child, child_schema = node[key], field_schema(schema, key)
        if _is_quantity(child_schema) or (_is_quantity(extra) and child_schema is extra):
            node[key] = _quantity(child)
            continue
        _normalise(child, child_schema)
        if key in required or child_schema is None:
            continue
        if child is None or child == [] or child == "" or (child == {} and _is_map(child_schema)):
            del node[key]


def go_shape(rt, obj: dict, schema) -> dict:
    """`obj` (in place) as the built-in kind's Go type encodes it; custom resources are left as they are."""
    if rt.builtin and schema is not None:
        _add_structs(obj, {k: v for k, v in EMPTY_OBJECTS.get(rt.key, {}).items() if k not in ("metadata",)})
        _add_nested_structs(obj, schema)
        _normalise(obj, schema)
        _drop_false(obj, _PLAIN_BOOLS.get(rt.key, ()))
    return obj
