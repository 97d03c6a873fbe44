"""Reads that span the apps contributing to a team namespace's desired state, and the system's health: whether
the broker and each cluster answer, and how far reconcile and the watchers are behind."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, F, Q, QuerySet, Sum

from portal import desired as registry
from portal import metrics
from tenants.models import Cluster, TeamNamespace
from tenants.selectors import active_clusters, cluster_reachable


def team_namespaces_for_reconcile(*, cluster: Cluster, pks=None) -> QuerySet[TeamNamespace]:
    """Every team namespace of a cluster (or those of `pks`, deleted ones included) with what its desired objects
    need, prefetched as each contribution asks (`Contribution.prefetch`)."""
    rows = TeamNamespace.objects.filter(cluster=cluster)
    return (
        (rows.filter(pk__in=pks) if pks is not None else rows.filter(deleted_at__isnull=True))
        .select_related("team__parent", "cluster")
        .prefetch_related(*registry.team_prefetches(cluster=cluster))
        .order_by("pk")
    )


def prefetched_inputs(row: TeamNamespace, *, shared: dict) -> dict:
    """What each contribution needs for a row of team_namespaces_for_reconcile, already read: the cluster's
    `shared` inputs and the row's prefetches."""
    return {**shared, **registry.row_inputs(row)}


def broker_reachable() -> tuple[bool, str]:
    if not settings.REDIS_URL:
        return True, "in-process tasks"
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        return False, str(exc)
    return True, ""


def dependencies() -> dict[str, tuple[bool, str]]:
    """The broker and every active cluster, checked at once: what the console's health page and `/readyz?verbose`
    report and the metrics export. None of them decides whether this pod can serve."""
    checks = {"broker": broker_reachable()}
    clusters = list(active_clusters())
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(clusters)))) as pool:
        for cluster, result in zip(clusters, pool.map(cluster_reachable, clusters), strict=True):
            checks[f"cluster:{cluster.name}"] = result
    return checks


@dataclass(frozen=True)
class ClusterBacklog:
    cluster: Cluster
    backlog: int  # team namespaces (and the cluster's own objects) whose latest change is not applied yet
    retrying: int  # rows waiting for a retry after a failed apply
    attempts: int  # failed attempts so far of the rows not yet converged
    jobs_due: int  # jobs whose objects are to be created or deleted
    watcher_lag: float | None  # seconds since its watcher last wrote; None when none has, or it can't be read
    watcher_known: bool  # False when Redis, where the watchers leave their mark, does not answer


def reconcile_backlog() -> list[ClusterBacklog]:
    """Per active cluster, how far reconcile and its watcher are behind: one aggregate query whatever the number
    of teams, plus one Redis round trip for the watchers."""
    clusters = {c.pk: c for c in Cluster.objects.filter(active=True).order_by("name")}
    rows = (TeamNamespace.objects.filter(cluster__in=clusters, deleted_at__isnull=True).values("cluster")
            .annotate(backlog=Count("pk", filter=Q(observed_generation__lt=F("generation"))),
                      retrying=Count("pk", filter=Q(attempts__gt=0, next_attempt_at__isnull=False)),
                      attempts=Sum("attempts", filter=Q(observed_generation__lt=F("generation")))))
    by_cluster = {row["cluster"]: row for row in rows}
    due = metrics.due_counts(list(clusters)).get("jobs", {})
    now = time.time()
    flushed = metrics.watcher_last_flush([c.name for c in clusters.values()])
    result = []
    for pk, cluster in clusters.items():
        row = by_cluster.get(pk, {})
        result.append(ClusterBacklog(
            cluster=cluster,
            backlog=row.get("backlog", 0) + (cluster.observed_generation < cluster.generation),
            retrying=row.get("retrying", 0) + (1 if cluster.attempts and cluster.next_attempt_at else 0),
            attempts=row.get("attempts") or 0, jobs_due=due.get(pk, 0),
            watcher_lag=max(0.0, now - flushed[cluster.name]) if flushed and cluster.name in flushed else None,
            watcher_known=flushed is not None))
    return result
