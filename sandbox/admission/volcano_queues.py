"""Volcano's admission webhooks for queues, and the queues its controllers create and open.

- pkg/webhooks/admission/queues/mutate/mutate_queue.go: reclaimable true and weight 1 when unset.
- pkg/webhooks/admission/queues/validate/validate_queue.go (validatequeue.volcano.sh): quantities, guarantee <=
  deserved <= capability, state Open/Closed, parent exists and is not itself, children's guarantee and deserved sums
  within the parent's, a child's capability within its ancestors', deleting neither default nor root nor a queue
  with children.
"""

from __future__ import annotations

from decimal import Decimal

from ..errors import ApiError
from ..quantity import parse_quantity
from . import fields as f

GROUP = "scheduling.volcano.sh"
QUEUE_KEY = (GROUP, "Queue")


def _queue_denied(message: str) -> ApiError:
    return f.denied("validatequeue.volcano.sh", message)


def queue_named(store, name: str):
    rt = store.registry.by_key.get(QUEUE_KEY)
    return None if rt is None else store._stored(rt, None, name)


def children_of(store, name: str) -> list[dict]:
    rt = store.registry.by_key.get(QUEUE_KEY)
    if rt is None:
        return []
    return [q for q in store._objects.get(rt.key, {}).get("", {}).values()
            if (q.get("spec") or {}).get("parent") == name]


def _go_type(value) -> str:
    """How encoding/json names a JSON value it cannot decode into a Go field (UnmarshalTypeError)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return f"number {value}"
    return "array" if isinstance(value, list) else "object"


def mutate_queue(op: str, obj: dict) -> None:
    if op != "CREATE":
        return
    spec = obj.setdefault("spec", {})
    weight = spec.get("weight")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int)):
        # mutate_queue.go decodes the queue first (pkg/webhooks/schema/schema.go DecodeQueue; QueueSpec.Weight is an
        # int32), before the schema is checked.
        raise f.denied("mutatequeue.volcano.sh", f"json: cannot unmarshal {_go_type(weight)} into Go struct field "
                                                 "QueueSpec.spec.weight of type int32")
    spec.setdefault("reclaimable", True)
    if not spec.get("weight"):
        spec["weight"] = 1


def _amount(resource: str, value) -> Decimal:
    """api.Resource's units: milli-CPU, bytes of memory, milli-units of scalar resources."""
    try:
        q = parse_quantity(value)
    except (ValueError, TypeError):
        return Decimal(0)
    return q if resource == "memory" else q * 1000


def _resources(values) -> dict[str, Decimal]:
    return {k: _amount(k, v) for k, v in (values or {}).items()}


def _resource_string(values: dict[str, Decimal]) -> str:
    """api.Resource.String(): cpu and memory always, then the scalar resources."""
    parts = [f"cpu {values.get('cpu', 0):.2f}", f"memory {values.get('memory', 0):.2f}"]
    parts += [f"{k} {v:.2f}" for k, v in sorted(values.items()) if k not in ("cpu", "memory")]
    return ", ".join(parts)


def _less_partly(parent: dict, total: dict) -> bool:
    return any(parent.get(k, Decimal(0)) < v for k, v in total.items())


def _quantity_causes(spec: dict) -> list[dict]:
    base, causes = "requestBody.spec", []
    for part in ("capability", "deserved"):
        for name, value in (spec.get(part) or {}).items():
            if _amount(name, value) < 0:
                causes.append(f.invalid(f"{base}.{part}.{name}", str(value), "must be greater than or equal to 0"))
    deserved = spec.get("deserved") or {}
    for name, value in ((spec.get("guarantee") or {}).get("resource") or {}).items():
        if name not in deserved:
            causes.append(f.invalid(f"{base}.deserved.{name}", "<nil>",
                                    f"deserved[{name}] must be >= guarantee[{name}]={value}"))
        elif _amount(name, deserved[name]) < _amount(name, value):
            causes.append(f.invalid(f"{base}.deserved.{name}", str(deserved[name]),
                                    f"deserved[{name}]={deserved[name]} must be >= guarantee[{name}]={value}"))
    capability = spec.get("capability") or {}
    for name, value in deserved.items():
        if name in capability and _amount(name, value) > _amount(name, capability[name]):
            causes.append(f.invalid(f"{base}.deserved.{name}", str(value),
                                    f"deserved[{name}]={value} must be <= capability[{name}]={capability[name]}"))
    return causes


def validate_queue(op: str, obj: dict, old: dict | None, store) -> None:
    name = obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    causes = _quantity_causes(spec)
    state = (obj.get("status") or {}).get("state")
    if state and state not in ("Open", "Closed"):
        causes.append(f.invalid("requestBody.spec.state", state, "queue state must be in [Open Closed]"))
    if causes:
        raise _queue_denied(f.aggregate(causes))
    parent_name = spec.get("parent", "")
    old_spec = (old or {}).get("spec") or {}
    if (op == "CREATE" or old_spec.get("parent", "") != parent_name) and parent_name not in ("", "root"):
        if parent_name == name:
            raise _queue_denied(f"queue {name} cannot use itself as parent")
        if queue_named(store, parent_name) is None:
            raise _queue_denied(f"failed to get parent queue of queue {name}: queue.scheduling.volcano.sh "
                                f'"{parent_name}" not found')
    changed = op == "CREATE" or any(old_spec.get(k) != spec.get(k) for k in ("parent", "capability", "deserved")) \
        or (old_spec.get("guarantee") or {}).get("resource") != (spec.get("guarantee") or {}).get("resource")
    if name != "root" and changed:
        _hierarchy(store, obj)


def _hierarchy(store, queue: dict) -> None:
    name, spec = queue["metadata"]["name"], queue.get("spec") or {}
    parent_name = spec.get("parent", "")
    if parent_name not in ("", "root"):
        parent = queue_named(store, parent_name)
        if parent is None:
            raise _queue_denied(f'parent queue {parent_name} not found: queue.scheduling.volcano.sh "{parent_name}" '
                                "not found")
        for resource, value in _resources(spec.get("capability")).items():
            ancestor = _ancestor_capability(store, queue, resource)
            if ancestor is not None and value > ancestor:
                raise _queue_denied(f"queue {name} capability[{resource}]={_fmt(resource, value)} exceeds its "
                                    f"ancestor's capability={_fmt(resource, ancestor)}")
        siblings = [q for q in children_of(store, parent_name) if q["metadata"]["name"] != name] + [queue]
        _sums(parent, siblings, f"parent queue {parent_name}")
    children = children_of(store, name)
    if children:
        for resource, value in _resources(spec.get("capability")).items():
            deepest = max((_subtree_capability(store, c, resource) for c in children), default=Decimal(0))
            if value < deepest:
                raise _queue_denied(f"queue {name} capability[{resource}]={_fmt(resource, value)} is smaller than "
                                    f"its descendants' max capability={_fmt(resource, deepest)}")
        _sums(queue, children, f"queue {name}")


def _sums(parent: dict, children: list[dict], who: str) -> None:
    pspec = parent.get("spec") or {}
    limits = {"guarantee": _resources((pspec.get("guarantee") or {}).get("resource")),
              "deserved": _resources(pspec.get("deserved"))}
    totals: dict[str, dict[str, Decimal]] = {"guarantee": {}, "deserved": {}}
    for child in children:
        cspec = child.get("spec") or {}
        for part, values in (("guarantee", (cspec.get("guarantee") or {}).get("resource")),
                             ("deserved", cspec.get("deserved"))):
            for k, v in _resources(values).items():
                totals[part][k] = totals[part].get(k, Decimal(0)) + v
            if _less_partly(limits[part], totals[part]):
                raise _queue_denied(f"{who} validation failed: sum of children's {part} "
                                    f"({_resource_string(totals[part])}) exceeds parent's {part} limit "
                                    f"({_resource_string(limits[part])})")


def _fmt(resource: str, value: Decimal) -> str:
    if resource == "cpu":
        return f"{value.normalize():f}m" if value % 1000 else f"{(value / 1000).normalize():f}"
    if resource == "memory":
        return f"{value.normalize():f}"
    return f"{value:.2f}"


def _ancestor_capability(store, queue: dict, resource: str):
    parent = (queue.get("spec") or {}).get("parent", "")
    while parent not in ("", "root"):
        node = queue_named(store, parent)
        if node is None:
            return None
        value = _resources((node.get("spec") or {}).get("capability")).get(resource, Decimal(0))
        if value > 0:
            return value
        parent = (node.get("spec") or {}).get("parent", "")
    return None


def _subtree_capability(store, queue: dict, resource: str) -> Decimal:
    value = _resources((queue.get("spec") or {}).get("capability")).get(resource, Decimal(0))
    if value > 0:
        return value
    children = children_of(store, queue["metadata"]["name"])
    return max((_subtree_capability(store, c, resource) for c in children), default=Decimal(0))


def validate_queue_delete(op: str, obj: dict | None, old: dict, store) -> None:
    name = old["metadata"]["name"]
    if name in ("default", "root"):
        raise _queue_denied(f"`{name}` queue can not be deleted")
    children = sorted(c["metadata"]["name"] for c in children_of(store, name))
    if children:
        raise _queue_denied(f"queue {name} can not be deleted because it has {len(children)} child queues: "
                            + ", ".join(children))


def open_queue(event: str, obj: dict, store, rt) -> None:
    """The queue controller (pkg/controllers/queue) reports a new queue `Open` unless it is being closed."""
    if event == "ADDED" and not (obj.get("status") or {}).get("state"):
        store.update(rt, {**obj, "status": {**(obj.get("status") or {}), "state": "Open"}}, None,
                     obj["metadata"]["name"], subresource="status")


MUTATORS = {QUEUE_KEY: mutate_queue}
VALIDATORS = {QUEUE_KEY: validate_queue}
DELETE_VALIDATORS = {QUEUE_KEY: validate_queue_delete}
CONTROLLERS = {QUEUE_KEY: open_queue}


def install_queues(store) -> None:
    """Volcano's controllers create the `root` queue and the `default` queue jobs without a queue go to."""
    rt = store.registry.by_key.get(QUEUE_KEY)
    if rt is None:
        return
    for name, spec in (("root", {"reclaimable": False, "weight": 1}), ("default", {"reclaimable": True,
                                                                                    "weight": 1})):
        if store._stored(rt, None, name) is None:
            store.create(rt, {"apiVersion": rt.api_version(), "kind": "Queue", "metadata": {"name": name},
                              "spec": spec})
