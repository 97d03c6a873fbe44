"""Pure builders for the core objects a team's quota becomes in a cluster whatever its scheduler: the
ResourceQuota and the LimitRange (the scheduler's own queue objects are its backend's, `backends/`).

Values in, plain dicts out, deterministic names. Quantities are strings in the API server's canonical form.
"""

from collections import defaultdict

from backends.specs import TeamQuotaSpec, gib
from portal.naming import team_labels

RESOURCE_QUOTA = "gpu-portal-quota"
LIMIT_RANGE = "gpu-portal-limits"


def _quota_keys(flavors) -> list[str]:
    return sorted({f.quota_key for f in flavors})


def resource_quota_manifest(team: TeamQuotaSpec) -> dict:
    """GPU requests capped at guaranteed + burst; a GPU resource the team does not hold is capped at zero,
    since a resource a ResourceQuota does not list is unlimited. Only `requests.` is enforced for extended
    resources, so no `limits.` entries are emitted for GPUs."""
    per_key: dict[str, int] = defaultdict(int)
    for key in _quota_keys(team.cluster_flavors):
        per_key[key] = 0
    for quota in team.quotas:
        per_key[quota.flavor.quota_key] += quota.guaranteed + quota.burst
    hard = {key: str(per_key[key]) for key in sorted(per_key)}
    totals = team.totals()
    if totals["cpu"]:
        hard["requests.cpu"] = str(totals["cpu"])
    if totals["memory"]:
        hard["requests.memory"] = gib(totals["memory"])
    if totals["storage"]:
        hard["requests.storage"] = gib(totals["storage"])
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": RESOURCE_QUOTA, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": {"hard": hard},
    }


def limit_range_manifest(team: TeamQuotaSpec) -> dict:
    """Per-container GPU maximum with an explicit default of 0: without it the API server copies `max` into
    `default`, and every container that asks for no GPU would be given the maximum."""
    largest: dict[str, int] = defaultdict(int)
    for flavor in team.cluster_flavors:
        if not flavor.device_class:  # a DRA device is no container resource
            largest[flavor.resource_name] = max(largest[flavor.resource_name], flavor.gpus_per_node)
    gpus = sorted(largest)
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": LIMIT_RANGE, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "max": {name: str(largest[name]) for name in gpus},
                    "default": {"cpu": "1", "memory": "4Gi", **{name: "0" for name in gpus}},
                    "defaultRequest": {"cpu": "500m", "memory": "2Gi", **{name: "0" for name in gpus}},
                }
            ]
        },
    }


# Volcano's queue webhook (volcano pkg/webhooks/admission/queues/validate/validate_queue.go) judges a queue's
# hierarchy against its parent and children as they are now: these refusals lift once the other queue has
# converged (a parent grown, a child shrunk, a department queue created), so they are retried with backoff.
VOLCANO_QUEUE_WEBHOOK = 'admission webhook "validatequeue.volcano.sh" denied the request'
VOLCANO_WAITING_ON_ANOTHER_QUEUE = ("exceeds parent's", "exceeds its ancestor's capability",
                                    "smaller than its descendants'", "failed to get parent queue",
                                    "parent queue ")


def volcano_queue_refusal_waits(status: int, message: str) -> bool:
    """Whether a refusal is Volcano's queue webhook waiting on another queue (retry), not a malformed queue."""
    if status not in (400, 403, 422) or VOLCANO_QUEUE_WEBHOOK not in message:
        return False
    reason = message.split(VOLCANO_QUEUE_WEBHOOK, 1)[1]
    return any(phrase in reason for phrase in VOLCANO_WAITING_ON_ANOTHER_QUEUE)
