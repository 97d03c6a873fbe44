"""Reads that span the apps contributing to a team namespace's desired state."""

from django.db.models import Prefetch, QuerySet

from quotas.models import Quota
from tenants.models import Cluster, Membership, TeamNamespace


def team_namespaces_for_reconcile(*, cluster: Cluster, pks=None) -> QuerySet[TeamNamespace]:
    """Every team namespace of a cluster (or those of `pks`, deleted ones included) with what its desired objects
    need, prefetched."""
    memberships = Membership.objects.select_related("user")
    quotas = Quota.objects.filter(flavor__cluster=cluster).select_related("flavor")
    rows = TeamNamespace.objects.filter(cluster=cluster)
    return (
        (rows.filter(pk__in=pks) if pks is not None else rows.filter(deleted_at__isnull=True))
        .select_related("team__parent", "cluster")
        # Into lists (`to_attr`): a related manager per row would clone a queryset per row.
        .prefetch_related(Prefetch("team__memberships", queryset=memberships, to_attr="prefetched_memberships"),
                          Prefetch("team__quotas", queryset=quotas, to_attr="prefetched_quotas"))
        .order_by("pk")
    )


def prefetched_inputs(row: TeamNamespace, *, flavors: list) -> dict:
    """What each contribution needs for a row of team_namespaces_for_reconcile, already read (None for a row read
    otherwise: its contributions then read it themselves)."""
    team = row.team
    return {"memberships": getattr(team, "prefetched_memberships", None),
            "quotas": getattr(team, "prefetched_quotas", None), "flavors": flavors}
