"""Reconcile of team namespaces and cluster-wide objects against the state every app contributes.

Level-triggered: the desired objects come from portal.desired (each app's contribution), are compared with what
the cluster holds, and only the difference is written. A single row is reconciled when a write nudges it; the
due sweep retries rows whose backoff has run out; the full sweep lists every kind once per cluster to repair
drift and prune what no row wants.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from portal import desired as registry
from portal import kube
from portal.desired import cluster_desired, team_namespace_desired
from portal.naming import MANAGED_BY, MANAGED_BY_LABEL, TEAM_LABEL, cluster_scope_selector, team_selector
from portal.reconcile import Outcome, Plan, converge, converge_many, plan, record, record_many
from tenants.models import Cluster, TeamNamespace

from .selectors import prefetched_inputs, team_namespaces_for_reconcile

log = logging.getLogger(__name__)


def team_kinds(cluster: Cluster) -> list[tuple[str, str]]:
    return registry.team_kinds(cluster.scheduler)


def cluster_kinds(cluster: Cluster) -> list[tuple[str, str]]:
    return registry.cluster_kinds(cluster.scheduler)



def _team_actual(client: kube.ClusterClient, row: TeamNamespace) -> list[dict]:
    selector = team_selector(row.team.slug)
    return client.list_all(
        (api_version, kind, row.team.namespace if kube.KINDS[(api_version, kind)].namespaced else None, selector)
        for api_version, kind in team_kinds(row.cluster)
    )


def team_namespace_reconcile(*, team_namespace_id: int, actual: list[dict] | None = None,
                             row: TeamNamespace | None = None) -> Outcome:
    """Make the cluster hold exactly what this team namespace wants. Safe to run any number of times."""
    if row is None:
        row = TeamNamespace.objects.select_related("team", "cluster").filter(pk=team_namespace_id).first()
        if row is None:
            return Outcome(statuses=[], writes=0)
    if not row.cluster.active:  # an inactive cluster is left alone: no reads, no writes, no pruning
        return Outcome(statuses=row.objects_status, writes=0)
    generation = row.generation
    desired = team_namespace_desired(team_namespace=row)
    try:
        client = kube.client_for_cluster(row.cluster)
        if actual is None:
            actual = _team_actual(client, row)
    except kube.KubeError as exc:
        return record(row, generation, Outcome(statuses=row.objects_status, writes=0, error=exc))
    registry.team_namespace_observed(team_namespace=row, actual=actual)
    outcome = record(row, generation, converge(client, plan(desired, actual)))
    if outcome.error is None and not desired and row.deleted_at is None:
        TeamNamespace.objects.filter(pk=row.pk).update(deleted_at=timezone.now())
    return outcome


# Due rows of one cluster from which on their objects are read with one list per kind for the whole cluster (as the
# sweep does) rather than with one list per kind per row.
BULK_LIST_ROWS = 20


def team_namespaces_reconcile(*, cluster: Cluster, rows: list[TeamNamespace]) -> list[Outcome]:
    """Many team namespaces of one cluster at once, each exactly as `team_namespace_reconcile` would: their calls
    share the cluster's workers and their status is written in bulk (still only what changed)."""
    if not rows:
        return []
    if not cluster.active:
        return [Outcome(statuses=row.objects_status, writes=0) for row in rows]
    client = kube.client_for_cluster(cluster)
    generations = [row.generation for row in rows]
    try:
        if len(rows) >= BULK_LIST_ROWS:
            by_team = _managed_team_objects(client, cluster)
            actuals = [by_team.get(row.team.slug, []) for row in rows]
        else:
            actuals = [_team_actual(client, row) for row in rows]
    except kube.KubeError as exc:
        outcomes = [Outcome(statuses=row.objects_status, writes=0, error=exc) for row in rows]
        record_many(TeamNamespace, list(zip(rows, generations, outcomes, strict=True)))
        return outcomes
    shared = registry.shared_inputs(cluster=cluster)
    wanted = [team_namespace_desired(team_namespace=row, **prefetched_inputs(row, shared=shared)) for row in rows]
    for row, actual in zip(rows, actuals, strict=True):
        registry.team_namespace_observed(team_namespace=row, actual=actual)
    outcomes = converge_many(client, [plan(want, actual) for want, actual in zip(wanted, actuals, strict=True)])
    record_many(TeamNamespace, list(zip(rows, generations, outcomes, strict=True)))
    gone = [row.pk for row, want, outcome in zip(rows, wanted, outcomes, strict=True)
            if outcome.error is None and not want and row.deleted_at is None]
    if gone:
        TeamNamespace.objects.filter(pk__in=gone).update(deleted_at=timezone.now())
    return outcomes


def cluster_reconcile(*, cluster_id: int, actual: list[dict] | None = None, widen: bool = False,
                      children_first: bool = False) -> Outcome:
    """`widen` asks the contributions for a first step that lets what sits beneath change either way (Volcano's
    parent queues at least their present size, parents first); then a `children_first` call sets the exact sizes."""
    cluster = Cluster.objects.filter(pk=cluster_id, active=True).first()
    if cluster is None:
        return Outcome(statuses=[], writes=0)
    generation = cluster.generation
    desired = cluster_desired(cluster=cluster, **registry.shared_inputs(cluster=cluster))
    try:
        client = kube.client_for_cluster(cluster)
        if actual is None:
            actual = _cluster_actual(client, cluster)
    except kube.KubeError as exc:
        return record(cluster, generation, Outcome(statuses=cluster.objects_status, writes=0, error=exc))
    the_plan = plan(registry.cluster_prepared(cluster=cluster, desired=desired, actual=actual, widen=widen), actual)
    levels = registry.cluster_apply_levels(cluster=cluster, objects=the_plan.apply, children_first=children_first)
    outcome = record(cluster, generation, _converge_by_level(client, the_plan, levels))
    if outcome.error is None and registry.cluster_unsettled(cluster=cluster):
        Cluster.objects.filter(pk=cluster.pk).update(
            next_attempt_at=timezone.now() + timedelta(seconds=settings.RECONCILE_BACKOFF_BASE_SECONDS))
    return outcome


def _converge_by_level(client: kube.ClusterClient, the_plan: Plan, levels: list[list[dict]]) -> Outcome:
    """The applies one level at a time in the order the scheduler needs them (`Backend.apply_levels`: Volcano's
    queues parents first or children first), a level only after the one before it went through; prunes follow."""
    if len(levels) < 2:
        return converge(client, the_plan)
    outcomes = [converge(client, Plan(apply=level)) for level in levels]
    error = next((o.error for o in outcomes if o.error is not None), None)
    last = converge(client, Plan(delete=the_plan.delete if error is None else [], unchanged=the_plan.unchanged))
    outcomes.append(last)
    return Outcome(statuses=[s for o in outcomes for s in o.statuses], writes=sum(o.writes for o in outcomes),
                   error=next((o.error for o in outcomes if o.error is not None and o.error.transient), error))


def reconcile_due(*, limit: int = 200) -> int:
    """Rows whose retry time (or nudge lease) has come: a change not yet applied, or a transient failure.

    Converged rows and permanently rejected ones have no next attempt, so they are not picked up here.
    """
    now = timezone.now()
    done = 0
    for cluster in Cluster.objects.filter(next_attempt_at__lte=now, active=True).order_by("next_attempt_at")[:limit]:
        _isolated(cluster_reconcile, cluster_id=cluster.pk)
        done += 1
    due = (TeamNamespace.objects.filter(next_attempt_at__lte=now, cluster__active=True)
           .order_by("next_attempt_at").values_list("pk", "cluster_id")[:limit])
    by_cluster: dict[int, list[int]] = defaultdict(list)
    for pk, cluster_id in due:
        by_cluster[cluster_id].append(pk)
    for cluster in Cluster.objects.filter(pk__in=by_cluster).order_by("pk"):
        rows = list(team_namespaces_for_reconcile(cluster=cluster, pks=by_cluster[cluster.pk]))
        if _isolated(team_namespaces_reconcile, cluster=cluster, rows=rows) is None:
            # Something unforeseen in the batch: each row on its own, so one row cannot hold up the others.
            for row in rows:
                _isolated(team_namespace_reconcile, team_namespace_id=row.pk, row=row)
        done += len(rows)
    return done


def _isolated(reconcile, **kwargs) -> Outcome | None:
    """Kubernetes errors are recorded on the row by the reconcile itself; anything unforeseen is logged here, so
    one row (or one cluster) cannot stop the rows after it."""
    try:
        return reconcile(**kwargs)
    except Exception:  # noqa: BLE001
        log.exception("%s(%s) failed", reconcile.__name__, kwargs)
        return None


def reconcile_sweep() -> dict:
    """Compare every cluster with the database in bulk; repair drift and prune what is no longer wanted.

    One list per kind per cluster, whatever the number of teams; a cluster that already matches gets no write.
    """
    totals = {"clusters": 0, "rows": 0, "repaired": 0, "writes": 0, "errors": 0}
    for cluster in Cluster.objects.filter(active=True).order_by("pk"):
        totals["clusters"] += 1
        try:
            _sweep_cluster(cluster, totals)
        except Exception:  # noqa: BLE001 - one cluster's surprise must not stop the sweep of the others
            log.exception("sweep of cluster %s failed", cluster.name)
            totals["errors"] += 1
    return totals


def _sweep_cluster(cluster: Cluster, totals: dict) -> None:
    """One cluster of the sweep: list once per kind, repair what drifted, prune what no row wants."""
    try:
        client = kube.client_for_cluster(cluster)
        cluster_actual = _cluster_actual(client, cluster)
        by_team = _managed_team_objects(client, cluster)
    except kube.KubeError as exc:
        totals["errors"] += 1
        record(cluster, cluster.generation, Outcome(statuses=cluster.objects_status, writes=0, error=exc))
        return
    shared = registry.shared_inputs(cluster=cluster)
    cluster_repaired = cluster.observed_generation < cluster.generation or not plan(
        cluster_desired(cluster=cluster, **shared), cluster_actual
    ).empty
    if cluster_repaired:
        outcome = cluster_reconcile(cluster_id=cluster.pk, actual=cluster_actual, widen=True)
        totals["repaired"] += 1
        totals["writes"] += outcome.writes
    rows = team_namespaces_for_reconcile(cluster=cluster)
    known = set()
    for row in rows:
        totals["rows"] += 1
        known.add(row.team.slug)
        actual = by_team.get(row.team.slug, [])
        registry.team_namespace_observed(team_namespace=row, actual=actual)
        desired = team_namespace_desired(team_namespace=row, **prefetched_inputs(row, shared=shared))
        if row.observed_generation >= row.generation and plan(desired, actual).empty:
            continue
        outcome = team_namespace_reconcile(team_namespace_id=row.pk, actual=actual, row=row)
        totals["repaired"] += 1
        totals["writes"] += outcome.writes
        totals["errors"] += outcome.error is not None
    totals["writes"] += _prune_orphans(client, {slug: objs for slug, objs in by_team.items() if slug not in known})
    if cluster_repaired:
        # What was widened before the teams' objects changed (Volcano refuses a parent queue smaller than the queues
        # under it) takes its exact size now that they have, children first.
        outcome = cluster_reconcile(cluster_id=cluster.pk, children_first=True)
        totals["writes"] += outcome.writes
        totals["errors"] += outcome.error is not None


def _cluster_actual(client: kube.ClusterClient, cluster: Cluster) -> list[dict]:
    return [obj for api_version, kind in cluster_kinds(cluster)
            for obj in client.list(api_version, kind, label_selector=cluster_scope_selector())]


def _managed_team_objects(client: kube.ClusterClient, cluster: Cluster) -> dict[str, list[dict]]:
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{TEAM_LABEL}"
    by_team: dict[str, list[dict]] = defaultdict(list)
    for api_version, kind in team_kinds(cluster):
        for obj in client.list(api_version, kind, label_selector=selector):
            by_team[obj["metadata"]["labels"][TEAM_LABEL]].append(obj)
    return by_team


def _prune_orphans(client: kube.ClusterClient, orphans: dict[str, list[dict]]) -> int:
    """Objects labelled for a team the database no longer has (e.g. removed by hand in the admin)."""
    writes = 0
    for slug, objects in orphans.items():
        outcome = converge(client, plan([], objects))
        writes += outcome.writes
        if outcome.error:
            log.warning("pruning objects of removed team %s failed: %s", slug, outcome.error)
    return writes
