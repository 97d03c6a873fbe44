"""Validation of objects as kube-apiserver does it (admission is `sandbox.admission`'s).

- Core kinds: the Kubernetes OpenAPI schemas shipped in `kubernetes-validate` (those of Kubernetes 1.34),
  loaded once per process; one compiled jsonschema validator per kind.
- Custom kinds: each CRD version's `openAPIV3Schema` converted once to JSON Schema; its defaults are applied first
  and its CEL rules (`x-kubernetes-validations`) evaluated after (`sandbox.structural`). `format` is not asserted.
- Patterns are RE2 (Go's regexp), for both.
- Both: unknown fields are pruned with a warning (the API server's default `fieldValidation=Warn`), or rejected
  with `fieldValidation=Strict` (400 BadRequest, "strict decoding error", as kube-apiserver answers).
- Names (DNS-1123 subdomain or label, or a path segment for RBAC kinds) and resource quantities.

`validate(obj)` / `Validator(crd_dirs).validate(obj)` give the same checks without a server, for manifest tests.
"""

from __future__ import annotations

import json
import re
import threading
from functools import cache
from pathlib import Path

import jsonschema

from . import upstream
from .admission.core_specs import binary_data_error
from .errors import ApiError, invalid
from .kinds import Registry, ResourceType
from .object_meta import metadata_causes
from .object_rules import cause, quantity_causes, render
from .quantity import QUANTITY_ERROR
from .structural import apply_defaults, cel_causes, has_keyword, re2_search


def _list_map_keys(validator, keys, instance, schema):
    if not isinstance(instance, list):
        return
    seen = set()
    for item in instance:
        if isinstance(item, dict):
            key = tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)
            if key in seen:
                values = ", ".join(f'"{k}":{json.dumps(item.get(k))}' for k in keys)
                yield jsonschema.ValidationError(f"Duplicate value: map[{values}]", validator="duplicate")
            seen.add(key)


def _re2_pattern(validator, pattern, instance, schema):
    if isinstance(instance, str) and not re2_search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_SchemaValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"x-list-map-keys": _list_map_keys, "pattern": _re2_pattern})


# The Kubernetes minor release whose built-in kinds the sandbox serves (the control plane it is measured against).
KUBERNETES_SCHEMAS = upstream.KUBERNETES.removeprefix("v")


def _schema_dir() -> Path:
    import kubernetes_validate.utils as kv

    return Path(kv.__file__).parent / "kubernetes-json-schema" / f"v{KUBERNETES_SCHEMAS}-local-strict"


@cache
def _core_definitions() -> tuple[Path, dict]:
    directory = _schema_dir()
    return directory, json.loads((directory / "_definitions.json").read_text())["$defs"]


def _inline_refs(node, definitions: dict, resolved: dict):
    """Replace every `$ref` by the (shared) definition it names, once: resolving references per validation
    costs more than the validation itself. Recursive definitions become cyclic dicts, which jsonschema walks fine
    because it only descends as deep as the instance goes."""
    if isinstance(node, list):
        return [_inline_refs(item, definitions, resolved) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and "#/$defs/" in ref:
        name = ref.rsplit("/", 1)[1]
        if name not in resolved:
            target = resolved[name] = {}
            target.update(_inline_refs(definitions[name], definitions, resolved))
        return resolved[name]
    return {k: _inline_refs(v, definitions, resolved) for k, v in node.items()}


_validators: dict[tuple, jsonschema.protocols.Validator | None] = {}
_resolved_definitions: dict[str, dict] = {}  # shared by every core kind's inlined schema
_validators_lock = threading.Lock()


def _core_validator(rt: ResourceType, version: str):
    key = ("core", rt.group, version, rt.kind)
    with _validators_lock:
        if key not in _validators:
            directory, definitions = _core_definitions()
            prefix = rt.group.split(".")[0]
            name = f"{rt.kind.lower()}-{prefix}-{version}.json" if rt.group else f"{rt.kind.lower()}-{version}.json"
            path = directory / name
            if path.exists():
                schema = _inline_refs(json.loads(path.read_text()), definitions, _resolved_definitions)
                _validators[key] = _SchemaValidator(schema)
            else:
                _validators[key] = None
        return _validators[key]


def object_meta_schema() -> dict:
    """ObjectMeta's published schema (its list types: finalizers a set, ownerReferences a map by uid), which a
    custom resource's metadata follows whatever its CRD says of metadata."""
    name = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    with _validators_lock:
        if name not in _resolved_definitions:
            _inline_refs({"$ref": f"#/$defs/{name}"}, _core_definitions()[1], _resolved_definitions)
        return _resolved_definitions[name]


def convert_crd_schema(node: dict, *, top: bool = False) -> dict:
    """OpenAPI v3 (structural CRD schema) -> JSON Schema 2020-12, with unknown fields flagged by
    `additionalProperties: false` (the caller decides whether that prunes or rejects)."""
    out: dict = {}
    preserve = node.get("x-kubernetes-preserve-unknown-fields", False)
    if node.get("x-kubernetes-int-or-string"):
        types = ["integer", "string"]
    elif node.get("type"):
        types = [node["type"]]
    else:
        types = []
    if types:
        out["type"] = types + (["null"] if node.get("nullable") else [])
    for keyword in ("enum", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
                    "minProperties", "maxProperties", "required", "uniqueItems", "multipleOf"):
        if keyword in node:
            out[keyword] = node[keyword]
    if "enum" in out and node.get("nullable"):
        out["enum"] = [*out["enum"], None]
    for bound in ("Minimum", "Maximum"):
        if node.get(f"exclusive{bound}") is True and bound.lower() in out:
            out[f"exclusive{bound}"] = out.pop(bound.lower())
    for keyword in ("allOf", "anyOf", "oneOf"):
        if keyword in node:
            out[keyword] = [convert_crd_schema(sub) for sub in node[keyword]]
    if "not" in node:
        out["not"] = convert_crd_schema(node["not"])
    if "items" in node:
        out["items"] = convert_crd_schema(node["items"])
    list_type = node.get("x-kubernetes-list-type")
    if list_type == "set":
        out["uniqueItems"] = True
    elif list_type == "map" and node.get("x-kubernetes-list-map-keys"):
        out["x-list-map-keys"] = node["x-kubernetes-list-map-keys"]
    properties = {k: convert_crd_schema(v) for k, v in (node.get("properties") or {}).items()}
    if node.get("x-kubernetes-embedded-resource"):
        properties.setdefault("apiVersion", {"type": "string"})
        properties.setdefault("kind", {"type": "string"})
        properties.setdefault("metadata", {"type": "object"})
    if top:
        # ObjectMeta is validated by the server's own rules, not the CRD's (usually empty) metadata schema.
        properties["metadata"] = {"type": "object"}
        properties.setdefault("apiVersion", {"type": "string"})
        properties.setdefault("kind", {"type": "string"})
    if properties:
        out["properties"] = properties
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        out["additionalProperties"] = convert_crd_schema(additional)
    elif additional is True:
        out["additionalProperties"] = True
    elif not preserve and "object" in types:
        out["additionalProperties"] = False
    return out


_schema_flags: dict[int, tuple] = {}


def _flags(schema: dict) -> tuple[bool, bool]:
    """(has defaults, has CEL rules) of a CRD schema, worked out once."""
    flags = _schema_flags.get(id(schema))
    if flags is None:
        flags = _schema_flags[id(schema)] = (has_keyword(schema, "default"),
                                             has_keyword(schema, "x-kubernetes-validations"), schema)
    return flags[:2]


def _crd_validator(rt: ResourceType, version: str):
    key = ("crd", id(rt), version)
    with _validators_lock:
        if key not in _validators:
            schema = convert_crd_schema(rt.crd_schemas[version], top=True)
            schema["properties"]["apiVersion"] = {"const": rt.api_version(version)}
            schema["properties"]["kind"] = {"const": rt.kind}
            _validators[key] = (_SchemaValidator(schema), rt)  # keep rt alive so id(rt) stays unique
        return _validators[key][0]


# Error rendering -----------------------------------------------------------------------------------------------

def _field(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _unknown_keys(error) -> list[str]:
    known = set(error.schema.get("properties", {}))
    patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
    return [k for k in error.instance if k not in known and not any(p.search(k) for p in patterns)]


def _unknown_paths(error) -> list[str]:
    base = _field(error.absolute_path)
    return [f"{base}.{k}" if base else k for k in _unknown_keys(error)]


def _error_cause(error) -> dict:
    field = _field(error.absolute_path)
    value = error.instance
    kind = error.validator
    if kind == "required":
        missing = re.match(r"'(.*)' is a required property", error.message)
        name = missing.group(1) if missing else "?"
        return cause(f"{field}.{name}" if field else name, "Required value", "FieldValueRequired")
    if kind == "type":
        wanted = error.validator_value
        wanted = [t for t in wanted if t != "null"] if isinstance(wanted, list) else [wanted]
        got = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
            type(value), "integer" if isinstance(value, int) else "number")
        return cause(field, f'Invalid value: "{got}": {field} in body must be of type {" or ".join(wanted)}: '
                             f'"{got}"', "FieldValueTypeInvalid")
    if kind in ("enum", "const"):
        options = error.validator_value if kind == "enum" else [error.validator_value]
        supported = ", ".join(json.dumps(o) for o in options)
        return cause(field, f"Unsupported value: {render(value)}: supported values: {supported}",
                      "FieldValueNotSupported")
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": "greater than or equal to", "exclusiveMinimum": "greater than",
                 "maximum": "less than or equal to", "exclusiveMaximum": "less than"}[kind]
        return cause(field, f"Invalid value: {render(value)}: {field} in body should be {words} "
                             f"{error.validator_value}")
    if kind == "pattern":
        return cause(field, f"Invalid value: {render(value)}: {field} in body should match "
                             f"'{error.validator_value}'")
    if kind == "minItems":  # kube-openapi's TooFewItems
        return cause(field, f"Invalid value: {len(value)}: {field} in body should have at least "
                             f"{error.validator_value} items")
    if kind in ("maxLength", "maxItems", "maxProperties"):
        return cause(field, f"Too long: may not have more than {error.validator_value} "
                             f"{'bytes' if kind == 'maxLength' else 'items'}", "FieldValueTooLong")
    if kind in ("uniqueItems", "duplicate"):
        return cause(field, "Duplicate value: " + (render(value) if kind == "uniqueItems" else error.message[17:]),
                      "FieldValueDuplicate")
    return cause(field, f"Invalid value: {render(value)}: {error.message}")


# The errors after which a custom resource's CEL rules are not evaluated.
_BLOCKING = {"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany",
             "FieldValueTypeInvalid"}


def _decodes_to_zero(error) -> bool:
    """A built-in kind's missing number or boolean is its Go zero value once decoded: `required` in its OpenAPI
    only says the field has no `omitempty` (a PriorityClass without `value` has value 0)."""
    if error.validator != "required":
        return False
    missing = re.match(r"'(.*)' is a required property", error.message)
    wanted = ((error.schema.get("properties") or {}).get(missing.group(1)) or {}).get("type") if missing else None
    wanted = wanted if isinstance(wanted, list) else [wanted]
    return bool(set(wanted) & {"integer", "number", "boolean"})


def _prune(obj: dict, error) -> None:
    node = obj
    for part in error.absolute_path:
        node = node[part]
    for key in _unknown_keys(error):
        node.pop(key, None)


def _strict_message(rt: ResourceType, version: str, paths: list[str]) -> str:
    fields = ", ".join(f'unknown field "{p}"' for p in paths)
    return f'{rt.kind} in version "{version}" cannot be handled as a {rt.kind}: strict decoding error: {fields}'


class Validator:
    """Validates objects against a `Registry` of kinds (built from `crd_dirs` when none is given)."""

    def __init__(self, crd_dirs=(), builtin_custom_kinds: bool | None = None, registry: Registry | None = None):
        self.registry = registry if registry is not None else Registry.build(crd_dirs, builtin_custom_kinds)

    def schema_validator(self, rt: ResourceType, version: str):
        return _core_validator(rt, version) if rt.builtin else _crd_validator(rt, version)

    def apply_schema_defaults(self, rt: ResourceType, version: str, obj: dict) -> None:
        """A custom kind's structural-schema defaults, as decoding applies them."""
        schema = None if rt.builtin else rt.crd_schemas.get(version)
        if schema is not None and _flags(schema)[0]:
            apply_defaults(schema, obj)

    def prune_unknown(self, rt: ResourceType, version: str, obj: dict) -> None:
        """Drop the fields the kind does not know, as decoding does (the write's field manager never owns them)."""
        validator = self.schema_validator(rt, version)
        for error in validator.iter_errors(obj) if validator is not None else ():
            if error.validator == "additionalProperties" and error.validator_value is False:
                _prune(obj, error)

    def problems(self, rt: ResourceType, version: str, obj: dict, *, check_name: bool = True, old: dict | None = None):
        """(unknown-field errors, causes) for `obj`, without deciding what they mean; a custom kind's schema
        defaults are applied to `obj` first, and its CEL rules see `old` (the object before an update)."""
        meta = obj.get("metadata") or {}
        schema = None if rt.builtin else rt.crd_schemas.get(version)
        if schema is not None and _flags(schema)[0]:
            apply_defaults(schema, obj)
        causes = metadata_causes(meta, rt.name_rule, builtin=rt.builtin, creating=check_name)
        unknown = []
        validator = self.schema_validator(rt, version)
        if validator is not None:
            for error in validator.iter_errors(obj):
                if error.validator == "additionalProperties" and error.validator_value is False:
                    unknown.append(error)
                elif not (rt.builtin and _decodes_to_zero(error)):
                    causes.append(_error_cause(error))
        causes.extend(quantity_causes(obj))
        if schema is not None and _flags(schema)[1]:
            if any(c["reason"] in _BLOCKING for c in causes):
                # apiextensions-apiserver strategy.go hasBlockingErr: the rules are skipped, and that is said.
                causes.append(cause("<nil>", "Invalid value: null: some validation rules were not checked because the "
                                             "object was invalid; correct the existing errors to complete validation"))
            else:
                causes.extend(cel_causes(schema, obj) if old is None else cel_causes(schema, obj, old))
        return unknown, causes

    def check(self, rt: ResourceType, version: str, obj: dict, *, strict: bool, check_name: bool = True,
              old: dict | None = None) -> list[str]:
        """Raise ApiError (422 Invalid, or 400 for strict unknown fields) or return warnings.

        Without strict, unknown fields are removed from `obj` in place (pruning) and reported as warnings.
        """
        unknown, causes = self.problems(rt, version, obj, check_name=check_name, old=old)
        binary = binary_data_error(obj) if rt.key == ("", "ConfigMap") else None
        if binary:
            raise ApiError(400, "BadRequest", f'{rt.kind} in version "{version}" cannot be handled as a {rt.kind}: '
                                              f"{binary}")
        if rt.builtin and any(QUANTITY_ERROR in c["message"] for c in causes):
            # A built-in kind's quantities are parsed as it is decoded: the request is refused before validation.
            raise ApiError(400, "BadRequest", f'{rt.kind} in version "{version}" cannot be handled as a {rt.kind}: '
                                              f"{QUANTITY_ERROR}")
        unknown_paths = [path for error in unknown for path in _unknown_paths(error)]
        if strict and unknown_paths:
            raise ApiError(400, "BadRequest", _strict_message(rt, version, unknown_paths))
        if causes:
            meta = obj.get("metadata") or {}
            raise invalid(rt.kind, rt.group, meta.get("name") or meta.get("generateName") or "", causes)
        for error in unknown:
            _prune(obj, error)
        return [f'unknown field "{p}"' for p in unknown_paths]

    def validate(self, obj: dict, *, strict: bool = True) -> list[str]:
        """Problems with `obj` as messages (empty = valid). An unknown apiVersion/kind is reported, never skipped."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not api_version or not kind:
            return ["apiVersion and kind are required"]
        rt = self.registry.for_object(api_version, kind)
        if rt is None:
            return [f'no matches for kind "{kind}" in version "{api_version}"']
        problems = []
        if not rt.namespaced and (obj.get("metadata") or {}).get("namespace"):
            problems.append(f"metadata.namespace: Forbidden: {kind} is cluster-scoped")
        obj = json.loads(json.dumps(obj))  # schema defaults are applied to the copy, never the caller's manifest
        unknown, causes = self.problems(rt, api_version.rpartition("/")[2], obj)
        unknown_paths = [path for error in unknown for path in _unknown_paths(error)]
        if strict and unknown_paths:
            problems.append(_strict_message(rt, api_version.rpartition("/")[2], unknown_paths))
        problems.extend(f"{c['field']}: {c['message']}" for c in causes)
        return problems


_default: Validator | None = None


def validate(obj: dict, *, strict: bool = True) -> list[str]:
    """Validate against the core kinds and the portal's builtin (permissive) custom kinds.

    For the upstream CRDs build a `Validator(crd_dirs=[...])` and call its `validate`.
    """
    global _default
    if _default is None:
        _default = Validator()
    return _default.validate(obj, strict=strict)
