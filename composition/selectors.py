"""Reads that span the apps contributing to a team namespace's desired state."""

from django.db.models import Prefetch, QuerySet

from quotas.models import Quota
from tenants.models import Cluster, Membership, TeamNamespace


def team_namespaces_for_reconcile(*, cluster: Cluster) -> QuerySet[TeamNamespace]:
    """Every team namespace of a cluster with what its desired objects need, prefetched."""
    memberships = Membership.objects.select_related("user")
    quotas = Quota.objects.filter(flavor__cluster=cluster).select_related("flavor")
    return (
        TeamNamespace.objects.filter(cluster=cluster, deleted_at__isnull=True)
        .select_related("team__parent", "cluster")
        .prefetch_related(Prefetch("team__memberships", queryset=memberships),
                          Prefetch("team__quotas", queryset=quotas))
        .order_by("pk")
    )


def prefetched_inputs(row: TeamNamespace, *, flavors: list) -> dict:
    """What each contribution needs for a row of team_namespaces_for_reconcile, already read."""
    return {"memberships": row.team.memberships.all(), "quotas": row.team.quotas.all(), "flavors": flavors}
