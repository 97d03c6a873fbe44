"""Dynamic Resource Allocation for a job's workers: a ResourceClaimTemplate, from which Kubernetes creates one
ResourceClaim per worker pod, and the pod-template fields that use it instead of an extended resource.

Shapes from resource.k8s.io/v1 (kubernetes staging/src/k8s.io/api/resource/v1/types.go): a claim's
`spec.devices.requests[]` each have a name (a DNS label) and `exactly` with `deviceClassName`, `allocationMode`
`ExactCount` and `count`, and optional CEL `selectors`; a pod lists `spec.resourceClaims[]` (name plus
`resourceClaimTemplateName`) and each container that uses one names it in `resources.claims[]`
(core/v1 types.go, PodResourceClaim and ResourceClaim). Kueue counts such claims against the logical resource its
`deviceClassMappings` give the class (kueue pkg/dra), Volcano's capacity plugin against
`deviceclass/<class>` (volcano pkg/scheduler/plugins/capacity/capacity.go).
"""

CLAIM = "gpus"  # the pod's name for its claim and the request's name inside it
# The scheduler's DRA plugin on a pod whose claim does not exist (kubernetes staging/src/k8s.io/
# dynamic-resource-allocation/resourceclaim/resourceclaim.go, ErrClaimNotFound): the portal creates a job's template
# before its pods, so what keeps the resourceclaim controller from creating the claim is the team's ResourceQuota,
# which caps the flavor's devices at guaranteed + burst (tenants.sharing.quota_resource). A scheduler whose queue
# does not count claims (Volcano's proportion plugin; its capacity plugin before v1.15) lets such a job past
# enqueue, so only this says why it waits.
CLAIM_NOT_CREATED_MARKER = "ResourceClaim not created yet"
RESOURCE_API = "resource.k8s.io/v1"


def claim_template_name(object_name: str) -> str:
    return f"{object_name}-{CLAIM}"


def claim_template_manifest(*, name: str, namespace: str, labels: dict, device_class: str, count: int,
                            selector: str = "") -> dict:
    """One template for the job: each worker pod gets a claim of its own for `count` devices of the class."""
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": claim_template_name(name), "namespace": namespace, "labels": dict(labels)},
        "spec": {"metadata": {"labels": dict(labels)},
                 "spec": {"devices": {"requests": [{"name": CLAIM, "exactly": exactly}]}}},
    }


def pod_claims(object_name: str) -> list[dict]:
    return [{"name": CLAIM, "resourceClaimTemplateName": claim_template_name(object_name)}]


def container_claims() -> list[dict]:
    return [{"name": CLAIM}]
