"""What each app puts into a cluster, registered here so that no app needs to know which others contribute.

A team namespace's desired objects are the access objects (tenants), the quota and queue objects (quotas), and
whatever else an app registers; a cluster's shared objects likewise. Each app registers one `Contribution` from
its AppConfig.ready(), in INSTALLED_APPS order, which is the order objects are listed and applied in. Beside the
objects, a contribution says what it reads ahead for many rows at once (prefetch), what it records of what the
cluster holds, how a cluster's plan is prepared and in which order it is applied: so the composition layer (above
every app), which reconciles rows against the assembled state and registers the `Reconciler` through which a
write asks for a reconcile, knows no app's internals. This module imports no app.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured

Kind = tuple[str, str]  # (apiVersion, kind)
EVERY_SCHEDULER = "*"


def _nothing(*args, **kwargs) -> list:
    return []


def _never(row) -> bool:
    return False


def _none(*args, **kwargs) -> dict:
    return {}


def _no_record(row, actual) -> None:
    return None


def _as_is(cluster, desired: list[dict], actual: list[dict], *, widen: bool) -> list[dict]:
    return desired


def _one_level(cluster, objects: list[dict], *, children_first: bool) -> list[list[dict]]:
    return [objects]


@dataclass(frozen=True)
class Contribution:
    """One app's part of the desired state.

    `team_objects(team_namespace, **given)` and `cluster_objects(cluster, **given)` build the objects; `given`
    holds what the caller already read (e.g. a sweep's prefetched rows), and a contributor reads what is missing
    itself. `team_kinds` / `cluster_kinds` name the kinds it owns per scheduler (EVERY_SCHEDULER for all), so
    the reconcile lists exactly those to find what to prune (and the cluster watcher watches them).
    `retired(team_namespace)` says the namespace must go entirely (every contribution's objects are then unwanted).

    The hooks, each optional:
    - `shared(cluster)`: what it reads once per cluster for all of its rows and its cluster objects (`given`);
    - `prefetch(cluster)`: `Prefetch`es on the cluster's TeamNamespace rows, and `given(row)` what they hold;
    - `record(team_namespace, actual)`: note what the cluster reports of the namespace's objects (their status);
    - `prepare(cluster, desired, actual, widen=)`: the cluster objects as the cluster can take them now;
      `widen` asks for a first step that lets what sits beneath change either way (exact sizes follow);
    - `order(cluster, objects, children_first=)`: the applies in levels, each after the one before;
    - `unsettled(cluster)`: the cluster's objects are mid-change: look again soon.
    """

    name: str
    team_kinds: Mapping[str, Sequence[Kind]] = field(default_factory=dict)
    cluster_kinds: Mapping[str, Sequence[Kind]] = field(default_factory=dict)
    team_objects: Callable[..., list[dict]] = _nothing
    cluster_objects: Callable[..., list[dict]] = _nothing
    retired: Callable[[Any], bool] = _never
    shared: Callable[[Any], dict] = _none
    prefetch: Callable[[Any], list] = _nothing
    given: Callable[[Any], dict] = _none
    record: Callable[[Any, list[dict]], None] = _no_record
    prepare: Callable[..., list[dict]] = _as_is
    order: Callable[..., list[list[dict]]] = _one_level
    unsettled: Callable[[Any], bool] = _never


_contributions: dict[str, Contribution] = {}


def register(contribution: Contribution) -> None:
    """Idempotent per name, so a reloaded app replaces its contribution rather than adding a second one."""
    _contributions[contribution.name] = contribution


def contributions() -> list[Contribution]:
    return list(_contributions.values())


def _kinds(table: str, scheduler: str) -> list[Kind]:
    kinds: list[Kind] = []
    for contribution in contributions():
        by_scheduler = getattr(contribution, table)
        kinds += [*by_scheduler.get(EVERY_SCHEDULER, ()), *by_scheduler.get(scheduler, ())]
    return kinds


def team_kinds(scheduler: str) -> list[Kind]:
    return _kinds("team_kinds", scheduler)


def cluster_kinds(scheduler: str) -> list[Kind]:
    return _kinds("cluster_kinds", scheduler)


def team_namespace_desired(*, team_namespace, **given) -> list[dict]:
    """Every object wanted in the cluster for this team namespace (empty once it may be deleted)."""
    if any(c.retired(team_namespace) for c in contributions()):
        return []
    return [obj for c in contributions() for obj in c.team_objects(team_namespace, **given)]


def cluster_desired(*, cluster, **given) -> list[dict]:
    """Cluster-wide objects shared by every team."""
    return [obj for c in contributions() for obj in c.cluster_objects(cluster, **given)]


def shared_inputs(*, cluster) -> dict:
    """What every contribution reads once per cluster, to be `given` to its row and cluster objects."""
    return {key: value for c in contributions() for key, value in c.shared(cluster).items()}


def team_prefetches(*, cluster) -> list:
    return [prefetch for c in contributions() for prefetch in c.prefetch(cluster)]


def row_inputs(team_namespace) -> dict:
    """What the prefetches read for this row (nothing for a row read otherwise: contributions then read it)."""
    return {key: value for c in contributions() for key, value in c.given(team_namespace).items()}


def team_namespace_observed(*, team_namespace, actual: list[dict]) -> None:
    for c in contributions():
        c.record(team_namespace, actual)


def cluster_prepared(*, cluster, desired: list[dict], actual: list[dict], widen: bool = False) -> list[dict]:
    for c in contributions():
        desired = c.prepare(cluster, desired, actual, widen=widen)
    return desired


def cluster_apply_levels(*, cluster, objects: list[dict], children_first: bool = False) -> list[list[dict]]:
    """The applies in levels: each contribution splits the levels before it further."""
    levels = [objects]
    for c in contributions():
        levels = [part for level in levels for part in c.order(cluster, level, children_first=children_first)]
    return [level for level in levels if level]


def cluster_unsettled(*, cluster) -> bool:
    return any(c.unsettled(cluster) for c in contributions())


# --- asking for a reconcile ----------------------------------------------------------------------------------


class Reconciler(Protocol):
    def team_namespaces(self, ids: list[int]) -> None: ...

    def clusters(self, ids: list[int]) -> None: ...


_reconciler: Reconciler | None = None


def set_reconciler(reconciler: Reconciler) -> None:
    global _reconciler
    _reconciler = reconciler


def reconciler() -> Reconciler:
    """Whoever reconciles rows (the composition layer's tasks); called after commit by the writes that bump a
    row's generation."""
    if _reconciler is None:
        raise ImproperlyConfigured("No reconciler is registered: is the composition app in INSTALLED_APPS?")
    return _reconciler
