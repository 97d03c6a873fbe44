"""Reads that span the apps contributing to a team namespace's desired state."""

from django.db.models import QuerySet

from portal import desired as registry
from tenants.models import Cluster, TeamNamespace


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
