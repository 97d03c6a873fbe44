"""Volcano's PodGroup webhooks (both on create only).

- pkg/webhooks/admission/podgroups/mutate/mutate_podgroup.go: a PodGroup in queue "default" takes the queue its
  namespace's `scheduling.volcano.sh/queue-name` annotation names.
- pkg/webhooks/admission/podgroups/validate/validate_podgroup.go (validatepodgroup.volcano.sh): the queue exists and
  is Open; networkTopology (and each subGroupPolicy's) does not set both highestTierAllowed and highestTierName.
"""

from __future__ import annotations

from . import fields as f
from .volcano_queues import GROUP, queue_named

PODGROUP_KEY = (GROUP, "PodGroup")
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"  # volcano.sh/apis scheduling/v1beta1 labels.go


def mutate_podgroup(op: str, obj: dict, store) -> None:
    spec = obj.get("spec") or {}
    if op != "CREATE" or spec.get("queue", "default") != "default":
        return
    rt = store.registry.by_key.get(("", "Namespace"))
    namespace = store._stored(rt, None, obj["metadata"].get("namespace") or "") if rt else None
    queue = ((namespace or {}).get("metadata", {}).get("annotations") or {}).get(QUEUE_ANNOTATION)
    if queue is not None:
        obj.setdefault("spec", {})["queue"] = queue


def _both_tiers(topology) -> bool:
    return bool(topology) and topology.get("highestTierAllowed") is not None and bool(topology.get("highestTierName"))


def validate_podgroup(op: str, obj: dict, old: dict | None, store) -> None:
    if op != "CREATE":
        return
    spec, message = obj.get("spec") or {}, ""
    name = spec.get("queue", "")
    if name:
        queue = queue_named(store, name)
        state = ((queue or {}).get("status") or {}).get("state", "")
        if queue is None:
            message += f'unable to find queue: queue.scheduling.volcano.sh "{name}" not found'
        elif state != "Open":
            message += f"can only submit PodGroup to queue with state `Open`, queue `{name}` status is `{state}`. "
    both = ["must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously."]
    if not _both_tiers(spec.get("networkTopology")):
        both = []
    policy = next((p for p in spec.get("subGroupPolicy") or () if _both_tiers(p.get("networkTopology"))), None)
    if policy is not None:
        both.append(f"in subGroupPolicy '{policy.get('name', '')}': must not specify 'highestTierAllowed' and "
                    "'highestTierName' in networkTopology simultaneously.")
    message += " ".join(both)
    if message:
        raise f.denied("validatepodgroup.volcano.sh", message)


STORE_MUTATORS = {PODGROUP_KEY: mutate_podgroup}
VALIDATORS = {PODGROUP_KEY: validate_podgroup}
