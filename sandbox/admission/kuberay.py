"""KubeRay v1.7.0's validating webhooks (vrayjob.kb.io, vraycluster.kb.io: ray-operator/pkg/webhooks/v1) and the
metadata rules they apply (ray-operator/controllers/ray/utils/validation.go ValidateRayJobMetadata and
ValidateRayClusterMetadata, limits from utils/constant.go: a RayCluster name of at most 53 characters, a RayJob's at
most 47 because its cluster's name adds a suffix; both DNS-1035 labels).

The webhook answers `apierrors.NewInvalid`, which the API server relays as 422 Invalid with the webhook's prefix.
"""

from __future__ import annotations

from ..errors import ApiError
from . import fields as f

MAX_RAYCLUSTER_NAME = 53
MAX_RAYJOB_NAME = MAX_RAYCLUSTER_NAME - 6


def _name_message(kind: str, name: str, limit: int, prefix: str) -> str | None:
    if len(name) > limit:
        return f"{prefix}{kind} name should be no more than {limit} characters"
    errs = f.is_dns1035_label(name)
    if errs:
        return f"{prefix}{kind} name should be a valid DNS1035 label: [{' '.join(errs)}]"
    return None


def _refuse(webhook: str, kind: str, name: str, message: str) -> ApiError:
    cause = f.invalid("metadata.name", name, message)
    body = f'{kind}.ray.io "{name}" is invalid: metadata.name: {cause["message"]}'
    error = f.denied(webhook, body, 422, "Invalid")
    error.details = {"name": name, "group": "ray.io", "kind": kind, "causes": [cause]}
    return error


def ray_job(op: str, obj: dict, old: dict | None, store) -> None:
    name = obj["metadata"].get("name", "")
    message = _name_message("RayJob", name, MAX_RAYJOB_NAME, "The RayJob metadata is invalid: ")
    if message:
        raise _refuse("vrayjob.kb.io", "RayJob", name, message)


def ray_cluster(op: str, obj: dict, old: dict | None, store) -> None:
    name = obj["metadata"].get("name", "")
    message = _name_message("RayCluster", name, MAX_RAYCLUSTER_NAME, "")
    if message:
        raise _refuse("vraycluster.kb.io", "RayCluster", name, message)
    seen = set()
    for i, group in enumerate((obj.get("spec") or {}).get("workerGroupSpecs") or ()):
        if group.get("groupName") in seen:
            cause = f.invalid(f"spec.workerGroupSpecs[{i}]", group, "worker group names must be unique")
            error = f.denied("vraycluster.kb.io", f'RayCluster.ray.io "{name}" is invalid: {cause["field"]}: '
                                                  f'{cause["message"]}', 422, "Invalid")
            error.details = {"name": name, "group": "ray.io", "kind": "RayCluster", "causes": [cause]}
            raise error
        seen.add(group.get("groupName"))


VALIDATORS = {("ray.io", "RayJob"): ray_job, ("ray.io", "RayCluster"): ray_cluster}
