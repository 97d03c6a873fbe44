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
from django.db import connection, transaction
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
    map, list or string, false and zero are met by an absent field: kube-apiserver serialises `omitempty` fields
    so (a PriorityClass's `globalDefault: false` never comes back, which made every sweep apply it again)."""
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(
            is_subset(value, actual[key]) if key in actual else value in ({}, [], "", False)
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


def _stages(the_plan: Plan) -> list[list[tuple[str, dict]]]:
    """The plan's calls in the order that matters: namespaces before what goes in them, then everything else
    applied, then pruned, namespaces last. The calls of one stage do not depend on each other."""
    applies = [("apply", obj) for obj in the_plan.apply]
    deletes = [("delete", obj) for obj in the_plan.delete]
    return [
        [call for call in applies if call[1]["kind"] == "Namespace"],
        [call for call in applies if call[1]["kind"] != "Namespace"],
        [call for call in deletes if call[1]["kind"] != "Namespace"],
        [call for call in deletes if call[1]["kind"] == "Namespace"],
    ]


def _carry_out(client, call: tuple[str, dict]):
    action, obj = call
    if action == "apply":
        return client.apply(obj)
    meta = obj["metadata"]
    return client.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))


def converge(client, the_plan: Plan) -> Outcome:
    """Apply then prune, stage by stage, the calls of a stage side by side on the client's workers.

    Every call of a stage is made and answers for its own object; after a stage with a failure nothing more is
    tried, and the applies it did not reach are waiting. The outcome's error is a transient one if any failure
    was (a retry is then due, and it repeats any permanent rejection beside it), else the first rejection.
    """
    return converge_many(client, [the_plan])[0]


def converge_many(client, plans: list[Plan]) -> list[Outcome]:
    """`converge()` for several plans against one cluster at once: each stage's calls of every plan share the
    client's workers, so many small plans cost about what their calls cost the API server."""
    stages = [_stages(p) for p in plans]
    statuses = [[_status(obj, "applied") for obj in p.unchanged] for p in plans]
    writes = [0] * len(plans)
    errors: list[KubeError | None] = [None] * len(plans)
    for stage in range(4):
        calls = [(i, call) for i in range(len(plans)) if errors[i] is None for call in stages[i][stage]]
        failed: dict[int, list[KubeError]] = {}
        for (i, (action, obj)), result in zip(
            calls, client.each(lambda item: _carry_out(client, item[1]), calls), strict=True
        ):
            if isinstance(result, KubeError):
                failed.setdefault(i, []).append(result)
                statuses[i].append(_status(obj, "failed", str(result)))
                continue
            writes[i] += 1
            if action == "apply":
                statuses[i].append(_status(obj, "applied"))
        for i, plan_errors in failed.items():
            errors[i] = next((e for e in plan_errors if e.transient), plan_errors[0])
            statuses[i].extend(_status(obj, "waiting") for later in stages[i][stage + 1:]
                               for action, obj in later if action == "apply")
    return [Outcome(statuses=_ordered(statuses[i]), writes=writes[i], error=errors[i]) for i in range(len(plans))]


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


# --- recording the outcome on a row (any model deriving from portal.reconciled.Reconciled) --------------------


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


def _changes(row, generation: int, condition: dict, **fields) -> dict:
    """What a reader would see change on the row; status is written only then (no-op resyncs stay write-free)."""
    previous = row.ready_condition
    same_condition = all(previous.get(k) == condition[k] for k in ("status", "reason", "message"))
    changed = {name: value for name, value in fields.items() if getattr(row, name) != value}
    if generation > row.observed_generation and condition["status"] == "True":
        changed["observed_generation"] = generation
    if not same_condition:
        changed["conditions"] = [c for c in row.conditions if c.get("type") != "Ready"] + [condition]
    return changed


def _success_changes(row, generation: int, outcome: Outcome, *, newer: bool) -> dict:
    applied = sum(1 for s in outcome.statuses if s["state"] == "applied")
    message = f"{applied} object{'' if applied == 1 else 's'} applied"
    condition = _condition("True", "Applied", message, row.ready_condition)
    # A change committed while we worked keeps the row due, so a lost nudge cannot strand it.
    fields = {"attempts": 0, "next_attempt_at": timezone.now() if newer else None,
              "objects_status": outcome.statuses}
    if outcome.writes or row.observed_generation < generation:
        fields["synced_at"] = timezone.now()
    return _changes(row, generation, condition, **fields)


def _failure_changes(row, generation: int, outcome: Outcome) -> dict:
    error = outcome.error
    log.warning("reconcile of %s failed: %s", row, error)
    if error.transient:
        attempts = row.attempts + 1
        delay = backoff_seconds(attempts)
        condition = _condition("False", "Retrying", str(error), row.ready_condition)
        next_at = timezone.now() + timedelta(seconds=delay)
    else:
        # A permanent rejection waits for a change (a new generation) or an explicit retry: no blind loop.
        attempts, next_at = row.attempts + 1, None
        condition = _condition("False", "Rejected", str(error), row.ready_condition)
    return _changes(row, generation, condition, attempts=attempts, next_attempt_at=next_at,
                    objects_status=outcome.statuses)


def record(row, generation: int, outcome: Outcome) -> Outcome:
    """Record a reconcile's outcome on its row, success or failure, writing only what changed."""
    if outcome.error is None:
        newer = type(row).objects.filter(pk=row.pk, generation__gt=generation).exists()
        changed = _success_changes(row, generation, outcome, newer=newer)
    else:
        changed = _failure_changes(row, generation, outcome)
    if changed:
        for name, value in changed.items():
            setattr(row, name, value)
        type(row).objects.filter(pk=row.pk).update(**changed)
    return outcome


def record_many(model, entries: list[tuple]) -> int:
    """`record()` for many `(row, generation, outcome)` of one model, with one read and one batched statement
    per set of changed fields rather than one or two round trips per row. Returns how many rows changed."""
    succeeded = [row.pk for row, _generation, outcome in entries if outcome.error is None]
    current = dict(model.objects.filter(pk__in=succeeded).values_list("pk", "generation")) if succeeded else {}
    by_fields: dict[tuple[str, ...], list[tuple]] = {}
    for row, generation, outcome in entries:
        if outcome.error is None:
            changed = _success_changes(row, generation, outcome, newer=current.get(row.pk, generation) > generation)
        else:
            changed = _failure_changes(row, generation, outcome)
        for name, value in changed.items():
            setattr(row, name, value)
        if changed:
            by_fields.setdefault(tuple(sorted(changed)), []).append((row, changed))
    if by_fields:
        with transaction.atomic(), connection.cursor() as cursor:
            for names, changes in by_fields.items():
                _update_rows(cursor, model, names, changes)
    return sum(len(changes) for changes in by_fields.values())


def _update_rows(cursor, model, names: tuple[str, ...], changes: list[tuple]) -> None:
    """One UPDATE by primary key, sent for every row at once (the driver batches it). Django's bulk_update builds
    a CASE per field and row, which cost more than the API calls it records."""
    quote = connection.ops.quote_name
    fields = [model._meta.get_field(name) for name in names]
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    sql = f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE {quote(model._meta.pk.column)} = %s"
    cursor.executemany(sql, [
        [field.get_db_prep_save(changed[field.name], connection) for field in fields] + [row.pk]
        for row, changed in changes
    ])
