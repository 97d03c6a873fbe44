"""Pod-spec rules of kube-apiserver beyond containers: scheduling constraints and volumes.

Transcribed from Kubernetes pkg/apis/core/validation/validation.go (function named per rule) and
k8s.io/apimachinery pkg/apis/meta/v1/validation (ValidateLabels, ValidateLabelName).
"""

from __future__ import annotations

from ..quantity import parse_quantity
from . import fields as f

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# validateVolumeSource checks the sources in the order of core.VolumeSource's fields.
_VOLUME_SOURCES = ("emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs",
                   "iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs", "quobyte",
                   "downwardAPI", "fc", "flexVolume", "configMap", "azureFile", "vsphereVolume",
                   "photonPersistentDisk", "portworxVolume", "azureDisk", "storageos", "projected", "scaleIO", "csi",
                   "ephemeral", "image")


def _dicts(items):
    return [(i, item) for i, item in enumerate(items or ()) if isinstance(item, dict)]


def node_selector_causes(selector, field: str) -> list[dict]:
    """ValidateLabels on spec.nodeSelector: keys are qualified names, values label values (both at the map's path)."""
    causes = []
    for key, value in (selector or {}).items() if isinstance(selector, dict) else ():
        causes += f.label_name_causes(field, key)
        causes += [f.invalid(field, value, m) for m in f.is_label_value(str(value))]
    return causes


def tolerations_causes(tolerations, field: str) -> list[dict]:
    """ValidateTolerations (with validateTaintEffect, empty effect allowed)."""
    causes = []
    for i, tol in _dicts(tolerations):
        path = f"{field}[{i}]"
        key, op, value, effect = (tol.get("key") or "", tol.get("operator") or "", tol.get("value") or "",
                                  tol.get("effect") or "")
        if key:
            causes += f.label_name_causes(f"{path}.key", key)
        if not key and op != "Exists":
            causes.append(f.invalid(f"{path}.operator", op, "operator must be Exists when `key` is empty, which "
                                                             'means "match all values and all keys"'))
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(f.invalid(f"{path}.effect", effect,
                                    "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("Equal", ""):
            errs = f.is_label_value(value)
            if errs:
                causes.append(f.invalid(f"{path}.operator", value, ";".join(errs)))
        elif op == "Exists":
            if value:
                causes.append(f.invalid(f"{path}.operator", value, "value must be empty when `operator` is 'Exists'"))
        else:
            causes.append(f.not_supported(f"{path}.operator", op, ("Equal", "Exists")))
        if effect and effect not in _EFFECTS:
            causes.append(f.not_supported(f"{path}.effect", effect, _EFFECTS))
    return causes


def _requirement_causes(req: dict, field: str, check_values: bool) -> list[dict]:
    """ValidateNodeSelectorRequirement."""
    causes, op, values = [], req.get("operator") or "", req.get("values") or []
    if op in ("In", "NotIn"):
        if not values:
            causes.append(f.required(f"{field}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            causes.append(f.forbidden(f"{field}.values",
                                      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            causes.append(f.required(f"{field}.values",
                                     "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        causes.append(f.invalid(f"{field}.operator", op, "not a valid selector operator"))
    causes += f.label_name_causes(f"{field}.key", req.get("key") or "")
    if check_values:
        causes += [f.invalid(f"{field}.values[{j}]", v, m) for j, v in enumerate(values)
                   for m in f.is_label_value(str(v))]
    return causes


def _term_causes(term, field: str, check_values: bool) -> list[dict]:
    """ValidateNodeSelectorTerm (matchExpressions; matchFields only by metadata.name)."""
    term = term if isinstance(term, dict) else {}
    causes = []
    for j, req in _dicts(term.get("matchExpressions")):
        causes += _requirement_causes(req, f"{field}.matchExpressions[{j}]", check_values)
    for j, req in _dicts(term.get("matchFields")):
        path = f"{field}.matchFields[{j}]"
        if req.get("operator") in ("In", "NotIn"):
            if len(req.get("values") or ()) != 1:
                causes.append(f.required(f"{path}.values", "must be only one value when `operator` is 'In' or "
                                                           "'NotIn' for node field selector"))
        else:
            causes.append(f.invalid(f"{path}.operator", req.get("operator") or "", "not a valid selector operator"))
        if req.get("key") != "metadata.name":
            causes.append(f.invalid(f"{path}.key", req.get("key") or "", "not a valid field selector key"))
    return causes


def affinity_causes(affinity, field: str) -> list[dict]:
    """validateAffinity -> validateNodeAffinity: ValidateNodeSelector for the required terms (label values checked),
    ValidatePreferredSchedulingTerms for the preferred ones (weight 1-100, values not checked)."""
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    if not isinstance(node, dict):
        return []
    causes, path = [], f"{field}.nodeAffinity"
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        terms_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = required.get("nodeSelectorTerms") or []
        if not terms:
            causes.append(f.required(terms_path, "must have at least one node selector term"))
        for i, term in enumerate(terms):
            causes += _term_causes(term, f"{terms_path}[{i}]", True)
    for i, term in _dicts(node.get("preferredDuringSchedulingIgnoredDuringExecution")):
        term_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = term.get("weight")
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            causes.append(f.invalid(f"{term_path}.weight", weight or 0, "must be in the range 1-100"))
        causes += _term_causes(term.get("preference"), f"{term_path}.preference", False)
    return causes


def _unique_label_causes(name: str, field: str, seen: set) -> list[dict]:
    """A required name that is a DNS-1123 label, unique among `seen` (which it joins)."""
    if not name:
        return [f.required(field)]
    causes = [f.invalid(field, name, m) for m in f.is_dns1123_label(name)]
    if name in seen:
        causes.append(f.duplicate(field, name))
    seen.add(name)
    return causes


def volumes_causes(volumes, field: str) -> tuple[list[dict], set]:
    """ValidateVolumes: names are unique DNS-1123 labels; validateVolumeSource: exactly one source, an emptyDir's
    sizeLimit not negative. Returns the causes and the volume names (for the mounts)."""
    causes, names = [], set()
    for i, vol in _dicts(volumes):
        path = f"{field}[{i}]"
        causes += _unique_label_causes(vol.get("name") or "", f"{path}.name", names)
        sources = [s for s in _VOLUME_SOURCES if vol.get(s) is not None]
        if not sources:
            causes.append(f.required(path, "must specify a volume type"))
        causes += [f.forbidden(f"{path}.{s}", "may not specify more than 1 volume type") for s in sources[1:]]
        limit = (vol.get("emptyDir") or {}).get("sizeLimit") if isinstance(vol.get("emptyDir"), dict) else None
        try:
            negative = limit is not None and parse_quantity(limit) < 0
        except (ValueError, TypeError):
            negative = False  # reported by the quantity check
        if negative:
            causes.append(f.forbidden(f"{path}.emptyDir.sizeLimit", "SizeLimit field must be a valid resource "
                                                                    "quantity"))
    return causes, names


def volume_mounts_causes(mounts, field: str, volumes: set) -> list[dict]:
    """validateVolumeMounts: the volume exists, mountPath is set and unique within the container."""
    causes, paths = [], set()
    for i, mount in _dicts(mounts):
        path, name, mount_path = f"{field}[{i}]", mount.get("name") or "", mount.get("mountPath") or ""
        if not name:
            causes.append(f.required(f"{path}.name"))
        if name not in volumes:
            causes.append(f.not_found(f"{path}.name", name))
        if not mount_path:
            causes.append(f.required(f"{path}.mountPath"))
        if mount_path in paths:
            causes.append(f.invalid(f"{path}.mountPath", mount_path, "must be unique"))
        paths.add(mount_path)
    return causes


def resource_claims_causes(spec: dict, field: str) -> list[dict]:
    """validatePodResourceClaims (names are unique DNS labels, each names exactly one of resourceClaimName and
    resourceClaimTemplateName) and validateResourceClaimNames (every container's resources.claims entry names one
    of them, once per name and request)."""
    causes, pod_names = [], set()
    for i, claim in _dicts(spec.get("resourceClaims")):
        path = f"{field}.resourceClaims[{i}]"
        causes += _unique_label_causes(claim.get("name") or "", f"{path}.name", pod_names)
        sources = [key for key in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(key)]
        if not sources:
            causes.append(f.invalid(path, claim, "must specify one of: `resourceClaimName`, "
                                                 "`resourceClaimTemplateName`"))
        elif len(sources) > 1:
            causes.append(f.invalid(path, claim, "at most one of `resourceClaimName` or "
                                                 "`resourceClaimTemplateName` may be specified"))
    known = ": " + ", ".join(sorted(pod_names)) if pod_names else " which is empty"
    for group in ("containers", "initContainers"):
        for c, ctr in _dicts(spec.get(group)):
            claims = ((ctr.get("resources") or {}).get("claims")) if isinstance(ctr.get("resources"), dict) else None
            seen = set()
            for i, claim in _dicts(claims):
                path, name = f"{field}.{group}[{c}].resources.claims[{i}]", claim.get("name") or ""
                if not name:
                    causes.append(f.required(path))
                    continue
                key = f"{name}/{claim['request']}" if claim.get("request") else name
                if key in seen:
                    causes.append(f.duplicate(path, key))
                seen.add(key)
                if name not in pod_names:
                    missing = f.not_found(path, name)
                    missing["message"] += f": must be one of the names in pod.spec.resourceClaims{known}"
                    causes.append(missing)
    return causes
