"""What apiextensions-apiserver does with a CRD's structural schema besides type checks.

- `pattern`s are Go RE2 expressions (k8s.io/kube-openapi validate uses Go's regexp): compiled with RE2 itself
  (`google-re2`), so `^(?i)[a-z]...` in Kueue's AdmissionCheck CRD means what it means to a real server.
- Defaulting (apiextensions-apiserver pkg/apiserver/schema/defaulting/algorithm.go): a property's `default` is set
  when the field is absent, after nulls of non-nullable fields are dropped (pkg/apiserver/schema/pruning), before
  validation.
- CEL (`x-kubernetes-validations`, pkg/apiserver/schema/cel/validation.go): every rule is evaluated on its node;
  a transition rule (one naming `oldSelf`) only on update where the old object has the node too. A failed rule is
  reported like the API server: `<path>: Invalid value: "<type>": <message>` (or `failed rule: <rule>`), or
  `Forbidden`/`Required value`/`Duplicate value` as the rule's `reason` asks.
"""

from __future__ import annotations

import json
import threading

import celpy
import re2
from celpy import celtypes

_patterns: dict[str, object] = {}
_programs: dict[str, object] = {}
_lock = threading.Lock()
_ENV = celpy.Environment()


def re2_search(pattern: str, text: str) -> bool:
    compiled = _patterns.get(pattern)
    if compiled is None:
        compiled = _patterns.setdefault(pattern, re2.compile(pattern))
    return compiled.search(text) is not None


# Defaulting ----------------------------------------------------------------------------------------------------

def _clone(value):
    return json.loads(json.dumps(value))


def apply_defaults(schema: dict, value) -> None:
    """Set schema defaults into `value` in place (absent fields only), walking properties, items and maps."""
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        if properties:
            for key, sub in properties.items():
                if key in value and value[key] is None and not sub.get("nullable"):
                    del value[key]
                if key not in value and "default" in sub:
                    value[key] = _clone(sub["default"])
                if key in value:
                    apply_defaults(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                apply_defaults(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(schema["items"], item)


# CEL -----------------------------------------------------------------------------------------------------------

def _program(rule: str):
    program = _programs.get(rule)
    if program is None:
        with _lock:
            program = _programs.get(rule)
            if program is None:
                program = _programs[rule] = _ENV.program(_ENV.compile(rule))
    return program


def _type_name(schema: dict, value) -> str:
    if schema.get("type"):
        return schema["type"]
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value), "number")


def _failure(rule: dict, path: str, schema: dict, value) -> dict:
    message = rule.get("message") or f"failed rule: {rule['rule']}"
    field = path + (rule.get("fieldPath") or "")
    reason = rule.get("reason") or "FieldValueInvalid"
    if reason == "FieldValueForbidden":
        text = f"Forbidden: {message}"
    elif reason == "FieldValueRequired":
        text = f"Required value: {message}"
    elif reason == "FieldValueDuplicate":
        text = f"Duplicate value: {message}"
    else:
        text = f'Invalid value: "{_type_name(schema, value)}": {message}'
    return {"reason": reason, "message": text, "field": field.lstrip(".")}


def _evaluate(rule: dict, value, old, has_old: bool):
    """True (passes), False (fails) or None (a transition rule without an old value: not evaluated)."""
    text = rule["rule"]
    transition = "oldSelf" in text
    if transition and not has_old:
        return None
    activation = {"self": celpy.json_to_cel(value)}
    if transition:
        activation["oldSelf"] = celpy.json_to_cel(old)
    result = _program(text).evaluate(activation)
    if isinstance(result, celtypes.BoolType):
        return bool(result)
    if isinstance(result, Exception):  # an evaluation error (e.g. no such key) fails the rule, as upstream
        return False
    return bool(result)


_NO_OLD = object()


def cel_causes(schema: dict, value, old=_NO_OLD, path: str = "") -> list[dict]:
    """Failed `x-kubernetes-validations` under `schema` for `value`; `old` the same node before an update."""
    if not isinstance(schema, dict):
        return []
    causes = []
    has_old = old is not _NO_OLD
    for rule in schema.get("x-kubernetes-validations") or ():
        try:
            passed = _evaluate(rule, value, old if has_old else None, has_old)
        except celpy.CELEvalError:
            passed = False
        if passed is False:
            causes.append(_failure(rule, path, schema, value))
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value and value[key] is not None:
                child_old = old[key] if has_old and isinstance(old, dict) and key in old else _NO_OLD
                causes.extend(cel_causes(sub, value[key], child_old, f"{path}.{key}"))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                child_old = old[key] if has_old and isinstance(old, dict) and key in old else _NO_OLD
                causes.extend(cel_causes(extra, item, child_old, f"{path}[{key}]"))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
        old_by_key = {}
        if keys and has_old and isinstance(old, list):
            old_by_key = {tuple(json.dumps(o.get(k)) for k in keys): o for o in old if isinstance(o, dict)}
        for i, item in enumerate(value):
            child_old = _NO_OLD
            if old_by_key and isinstance(item, dict):
                child_old = old_by_key.get(tuple(json.dumps(item.get(k)) for k in keys), _NO_OLD)
            causes.extend(cel_causes(items, item, child_old, f"{path}[{i}]"))
    return causes


def _children(schema: dict):
    yield from (schema.get("properties") or {}).values()
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield schema[key]
    for key in ("allOf", "anyOf", "oneOf"):
        yield from schema.get(key) or ()


def has_keyword(schema, keyword: str) -> bool:
    """Whether any node of `schema` has `keyword` (most CRDs have no CEL rules or defaults: skip those walks)."""
    if not isinstance(schema, dict):
        return False
    return keyword in schema or any(has_keyword(sub, keyword) for sub in _children(schema))
