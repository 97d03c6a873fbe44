"""Level-triggered reconcile, shared by every reconciled row.

`plan()` is pure: given the objects a row wants and the objects of ours found in the cluster, it says what
to apply and what to prune. `converge()` carries a plan out through a gateway client. Rows record the outcome
with `record_*()`, which write only what changed. Nothing here knows about teams, quotas or jobs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from portal.kube import KubeError

log = logging.getLogger(__name__)

Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
Path = tuple[str, ...]

# Metadata the server sets or that names the object: never part of what an apply configuration owns.
_IDENTITY_METADATA = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                      "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}


def object_key(obj: dict) -> Key:
    meta = obj.get("metadata", {})
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])


def is_subset(desired, actual) -> bool:
    """True when every field we declare has the same value in the cluster (which may add defaults). An empty
    map or list is met by an absent field: a server serialising with `omitempty` leaves it out."""
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(
            is_subset(value, actual[key]) if key in actual else value in ({}, [])
            for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(actual, list)
            and len(desired) == len(actual)
            and all(is_subset(d, a) for d, a in zip(desired, actual, strict=True))
        )
    return desired == actual or (str(desired) == str(actual) and not isinstance(desired, bool))


def declared_fields(obj: dict) -> dict[Path, object]:
    """The fields an apply of `obj` declares, each with its value: maps are walked, lists and scalars (and empty
    maps) are single fields, as server-side apply owns them (a list is owned whole or item by item, and either
    way it is compared whole by `is_subset`)."""
    fields: dict[Path, object] = {}

    def walk(value, path: Path) -> None:
        if isinstance(value, dict) and value:
            for key, child in value.items():
                walk(child, (*path, key))
        else:
            fields[path] = value

    for key, value in obj.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata":
            value = {k: v for k, v in (value or {}).items() if k not in _IDENTITY_METADATA}
            if not value:
                continue
        walk(value, (key,))
    return fields


def _fields_v1_paths(tree: dict, prefix: Path = ()) -> set[Path]:
    """Field paths of a `fieldsV1` set. `f:<name>` is a map key; `k:`, `v:` and `i:` are items of a list,
    recorded as the list itself; `.` marks the map itself as owned (a leaf when it has no owned children)."""
    paths: set[Path] = set()
    for key, child in tree.items():
        if key.startswith("f:"):
            path = (*prefix, key[2:])
            paths |= _fields_v1_paths(child or {}, path) or {path}
        elif key != "." and prefix:
            paths.add(prefix)
    return paths


def owned_fields(obj: dict, manager: str) -> set[Path] | None:
    """The fields `manager` owns by apply in a live object, from its `managedFields`; None when it owns none
    (an object created some other way, or a server that does not report managed fields)."""
    entries = [e for e in (obj.get("metadata") or {}).get("managedFields") or []
               if e.get("manager") == manager and e.get("operation") == "Apply" and not e.get("subresource")]
    if not entries:
        return None
    paths: set[Path] = set()
    for entry in entries:
        paths |= _fields_v1_paths(entry.get("fieldsV1") or {})
    return paths


def stale_fields(desired: dict, live: dict, manager: str) -> set[Path]:
    """Fields the manager owns in the live object that `desired` no longer declares: applying `desired` makes
    the API server remove them, and nothing else shows they are there (they are a superset, not a drift)."""
    owned = owned_fields(live, manager)
    if not owned:
        return set()
    declared = declared_fields(desired)
    stale = set()
    for path in owned:
        if path in declared or any(d[: len(path)] == path for d in declared):
            continue  # declared, or a map above declared fields
        if any(path[: len(d)] == d and not isinstance(v, dict) for d, v in declared.items()):
            continue  # inside a list or scalar we declare whole
        stale.add(path)
    return stale


@dataclass
class Plan:
    apply: list[dict] = field(default_factory=list)
    delete: list[dict] = field(default_factory=list)
    unchanged: list[dict] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.apply and not self.delete


def _comparable(obj: dict) -> dict:
    # Status is the cluster's business, not ours.
    return {k: v for k, v in obj.items() if k != "status"}


APPLIED_HASH_ANNOTATION = "gpu-portal.io/applied-hash"


def applied_hash(obj: dict) -> str:
    body = json.dumps(_comparable(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def with_applied_hash(obj: dict) -> dict:
    """The object as applied: annotated with a hash of itself, so a later change of what the portal wants is
    seen even where the live object still looks like a superset of it (an item left inside an atomic list)."""
    meta = obj["metadata"]
    annotations = {**(meta.get("annotations") or {}), APPLIED_HASH_ANNOTATION: applied_hash(obj)}
    return {**obj, "metadata": {**meta, "annotations": annotations}}


def needs_apply(desired: dict, live: dict | None, manager: str) -> bool:
    """A missing or terminating object, a declared field with another value, a change of what the portal
    wants since its last apply, or a field it once declared and no longer wants (a give-back must leave the
    cluster). `desired` carries its applied hash."""
    if live is None or live["metadata"].get("deletionTimestamp"):
        return True
    return not is_subset(_comparable(desired), live) or bool(stale_fields(desired, live, manager))


def plan(desired: list[dict], actual: list[dict], *, update: bool = True, manager: str | None = None) -> Plan:
    """`update=False` creates what is missing but never rewrites what exists (for objects that the cluster
    takes over once created, such as a job the scheduler has admitted). `manager` is the field manager whose
    owned fields decide removals (the portal's by default)."""
    manager = manager or settings.KUBE_FIELD_MANAGER
    desired = [with_applied_hash(obj) for obj in desired]
    found = {object_key(obj): obj for obj in actual}
    wanted = {object_key(obj) for obj in desired}
    result = Plan()
    for obj in desired:
        current = found.get(object_key(obj))
        if current is None or current["metadata"].get("deletionTimestamp") or (
            update and needs_apply(obj, current, manager)
        ):
            result.apply.append(obj)
        else:
            result.unchanged.append(obj)
    deleted_namespaces = {
        obj["metadata"]["name"] for key, obj in found.items() if key not in wanted and obj["kind"] == "Namespace"
    }
    for key, obj in found.items():
        if key in wanted or obj["metadata"].get("deletionTimestamp"):
            continue
        # Deleting a namespace deletes what is in it; asking again for each object only adds noise.
        if key[2] and key[2] in deleted_namespaces:
            continue
        result.delete.append(obj)
    # Namespaces last, so objects inside are pruned before their namespace goes.
    result.delete.sort(key=lambda o: o["kind"] == "Namespace")
    return result


@dataclass
class Outcome:
    statuses: list[dict]
    writes: int
    error: KubeError | None = None


def converge(client, the_plan: Plan) -> Outcome:
    """Apply then prune, in plan order; stop at the first failure and say which object it was."""
    statuses = [_status(obj, "applied") for obj in the_plan.unchanged]
    writes = 0
    pending = [("apply", obj) for obj in the_plan.apply] + [("delete", obj) for obj in the_plan.delete]
    for index, (action, obj) in enumerate(pending):
        try:
            if action == "apply":
                client.apply(obj)
            else:
                client.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"],
                              obj["metadata"].get("namespace"))
        except KubeError as exc:
            statuses.append(_status(obj, "failed", str(exc)))
            statuses.extend(_status(o, "waiting") for a, o in pending[index + 1:] if a == "apply")
            return Outcome(statuses=_ordered(statuses), writes=writes, error=exc)
        writes += 1
        if action == "apply":
            statuses.append(_status(obj, "applied"))
    return Outcome(statuses=_ordered(statuses), writes=writes)


def _status(obj: dict, state: str, message: str = "") -> dict:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "state": state,
        "message": message,
    }


def _ordered(statuses: list[dict]) -> list[dict]:
    return sorted(statuses, key=lambda s: (s["kind"] != "Namespace", s["kind"], s["namespace"], s["name"]))


# --- recording the outcome on a row (any model deriving from tenants.models.Reconciled) -------------------


def backoff_seconds(attempt: int) -> float:
    """Capped exponential backoff with full jitter in the upper half, so retries of many rows spread out."""
    base = settings.RECONCILE_BACKOFF_BASE_SECONDS * (2 ** max(0, attempt - 1))
    capped = min(settings.RECONCILE_BACKOFF_MAX_SECONDS, base)
    return capped * random.uniform(0.5, 1.0)


def _condition(status: str, reason: str, message: str, previous: dict) -> dict:
    unchanged = previous.get("status") == status
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": previous.get("lastTransitionTime")
        if unchanged and previous.get("lastTransitionTime")
        else timezone.now().isoformat(timespec="seconds"),
    }


def _save_if_changed(row, generation: int, condition: dict, **fields) -> bool:
    """Write status only when something a reader would see changed (keeps no-op resyncs write-free)."""
    previous = row.ready_condition
    same_condition = all(previous.get(k) == condition[k] for k in ("status", "reason", "message"))
    changed = {name: value for name, value in fields.items() if getattr(row, name) != value}
    if generation > row.observed_generation and condition["status"] == "True":
        changed["observed_generation"] = generation
    if not same_condition:
        changed["conditions"] = [c for c in row.conditions if c.get("type") != "Ready"] + [condition]
    if not changed:
        return False
    for name, value in changed.items():
        setattr(row, name, value)
    type(row).objects.filter(pk=row.pk).update(**changed)
    return True


def record_success(row, generation: int, outcome: Outcome) -> bool:
    applied = sum(1 for s in outcome.statuses if s["state"] == "applied")
    condition = _condition("True", "Applied", f"{applied} objects applied", row.ready_condition)
    # A change committed while we worked keeps the row due, so a lost nudge cannot strand it.
    newer = type(row).objects.filter(pk=row.pk, generation__gt=generation).exists()
    fields = {"attempts": 0, "next_attempt_at": timezone.now() if newer else None,
              "objects_status": outcome.statuses}
    if outcome.writes or row.observed_generation < generation:
        fields["synced_at"] = timezone.now()
    return _save_if_changed(row, generation, condition, **fields)


def record_failure(row, generation: int, outcome: Outcome) -> bool:
    error = outcome.error
    if error.transient:
        attempts = row.attempts + 1
        delay = backoff_seconds(attempts)
        condition = _condition("False", "Retrying", str(error), row.ready_condition)
        next_at = timezone.now() + timedelta(seconds=delay)
    else:
        # A permanent rejection waits for a change (a new generation) or an explicit retry: no blind loop.
        attempts, next_at = row.attempts + 1, None
        condition = _condition("False", "Rejected", str(error), row.ready_condition)
    return _save_if_changed(
        row, generation, condition, attempts=attempts, next_attempt_at=next_at, objects_status=outcome.statuses
    )


def record(row, generation: int, outcome: Outcome) -> Outcome:
    """Record a reconcile's outcome on its row, success or failure."""
    if outcome.error is None:
        record_success(row, generation, outcome)
    else:
        log.warning("reconcile of %s failed: %s", row, outcome.error)
        record_failure(row, generation, outcome)
    return outcome
