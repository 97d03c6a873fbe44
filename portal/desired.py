"""What each app puts into a cluster, registered here so that no app needs to know which others contribute.

A team namespace's desired objects are the access objects (tenants), the quota and queue objects (quotas), and
whatever else an app registers; a cluster's shared objects likewise. Each app registers one `Contribution` from
its AppConfig.ready(), in INSTALLED_APPS order, which is the order objects are listed and applied in. The
composition layer (above every app) reconciles rows against the assembled state and registers the `Reconciler`
through which a write asks for a reconcile; this module imports no app.
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


def _never(team_namespace) -> bool:
    return False


@dataclass(frozen=True)
class Contribution:
    """One app's part of the desired state.

    `team_objects(team_namespace, **given)` and `cluster_objects(cluster, **given)` build the objects; `given`
    holds what the caller already read (e.g. a sweep's prefetched rows), and a contributor reads what is missing
    itself. `team_kinds` / `cluster_kinds` name the kinds it owns per scheduler (EVERY_SCHEDULER for all), so
    the reconcile lists exactly those to find what to prune. `retired(team_namespace)` says the namespace must
    go entirely (every contribution's objects are then unwanted).
    """

    name: str
    team_kinds: Mapping[str, Sequence[Kind]] = field(default_factory=dict)
    cluster_kinds: Mapping[str, Sequence[Kind]] = field(default_factory=dict)
    team_objects: Callable[..., list[dict]] = _nothing
    cluster_objects: Callable[..., list[dict]] = _nothing
    retired: Callable[[Any], bool] = _never


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
