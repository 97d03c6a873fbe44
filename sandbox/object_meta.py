"""ObjectMeta as kube-apiserver validates it on every write, before the kind's own rules: the name (or the
generateName prefix) by the kind's name rule, labels, annotations, owner references and finalizers.

After k8s.io/apimachinery pkg/api/validation/objectmeta.go (ValidateObjectMetaAccessor and
ValidateObjectMetaAccessorUpdate), pkg/api/validation/generic.go (the name functions; a generateName prefix is
checked with its trailing dash masked), pkg/api/validation/path/name.go (RBAC's path-segment names) and, for the
built-in kinds, kubernetes pkg/apis/core/validation (validateKubeFinalizerName: a finalizer without a
domain must be a standard one). Custom resources only warn about such a finalizer (apiextensions-apiserver)."""

from __future__ import annotations

from .admission.fields import (
    STANDARD_FINALIZERS,
    cause,
    invalid,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    label_name_causes,
    required,
)

TOTAL_ANNOTATION_SIZE = 256 * (1 << 10)
_ORPHAN, _FOREGROUND = "orphan", "foregroundDeletion"


def _mask_trailing_dash(name: str) -> str:
    # Upstream drops the last two characters and appends "a" (generic.go maskTrailingDash): kept as it is.
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def _path_segment(name: str, prefix: bool) -> list[str]:
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{part}'" for part in ("/", "%") if part in name]


def name_messages(name: str, rule: str, *, prefix: bool = False) -> list[str]:
    """What the kind's name function says of `name` (`prefix`: a generateName)."""
    if rule == "path":
        return _path_segment(name, prefix)
    if prefix:
        name = _mask_trailing_dash(name)
    check = {"label": is_dns1123_label, "dns1035": is_dns1035_label}.get(rule, is_dns1123_subdomain)
    return check(name)


def _owner_reference_causes(refs, field: str) -> list[dict]:
    causes = []
    for ref in refs if isinstance(refs, list) else ():
        if not isinstance(ref, dict):
            continue
        api_version = ref.get("apiVersion") or ""
        if not api_version.rpartition("/")[2]:
            causes.append(invalid(f"{field}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                causes.append(invalid(f"{field}.{key}", ref.get(key) or "", "must not be empty"))
    return causes


def _finalizer_causes(finalizers, builtin: bool) -> list[dict]:
    if not isinstance(finalizers, list):
        return []
    names = [f for f in finalizers if isinstance(f, str)]
    causes = [invalid("metadata.finalizers", f, m) for f in names for m in is_qualified_name(f)]
    if _ORPHAN in names and _FOREGROUND in names:
        causes.append(cause("metadata.finalizers", f'Invalid value: {_render_list(names)}: finalizer {_ORPHAN} and '
                                                   f"{_FOREGROUND} cannot be both set"))
    if builtin:
        causes += [invalid(f"metadata.finalizers[{i}]", f, "name is neither a standard finalizer name nor is it "
                                                            "fully qualified")
                   for i, f in enumerate(names) if "/" not in f and f not in STANDARD_FINALIZERS]
    return causes


def _render_list(values: list[str]) -> str:
    return "[" + ",".join(f'"{v}"' for v in values) + "]"


def _string_map(value) -> dict:
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def metadata_causes(meta: dict, rule: str, *, builtin: bool, creating: bool = True) -> list[dict]:
    """The causes kube-apiserver lists for an object's metadata, in its order (name first on create)."""
    causes: list[dict] = []
    if creating:
        generate = meta.get("generateName")
        if isinstance(generate, str) and generate:
            causes += [invalid("metadata.generateName", generate, m)
                       for m in name_messages(generate, rule, prefix=True)]
        name = meta.get("name")
        if not name:
            causes.append(required("metadata.name", "name or generateName is required"))
        elif isinstance(name, str):
            causes += [invalid("metadata.name", name, m) for m in name_messages(name, rule)]
        generation = meta.get("generation")
        if isinstance(generation, int) and generation < 0:
            causes.append(invalid("metadata.generation", generation, "must be greater than or equal to 0"))
    for key, value in _string_map(meta.get("labels")).items():
        causes += label_name_causes("metadata.labels", key)
        causes += [invalid("metadata.labels", value, m) for m in is_label_value(value)]
    annotations = _string_map(meta.get("annotations"))
    for key in annotations:
        causes += [invalid("metadata.annotations", key, m) for m in is_qualified_name(key.lower())]
    if sum(len(k) + len(v) for k, v in annotations.items()) > TOTAL_ANNOTATION_SIZE:
        causes.append(cause("metadata.annotations", f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE} bytes",
                            "FieldValueTooLong"))
    causes += _owner_reference_causes(meta.get("ownerReferences"), "metadata.ownerReferences")
    causes += _finalizer_causes(meta.get("finalizers"), builtin)
    return causes

