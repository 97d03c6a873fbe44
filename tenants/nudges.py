"""Asking for a reconcile: a write bumps the generation of the rows whose objects must change, in its own
transaction, and the composition layer's reconciler is nudged once that transaction commits. A nudge lost on the
way is picked up by the due sweep when the lease runs out."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from portal import desired

from .audit import audit_record
from .models import Cluster, TeamNamespace


def lease() -> timezone.datetime:
    return timezone.now() + timedelta(seconds=settings.RECONCILE_LEASE_SECONDS)


def team_namespaces_touch(*, team_namespaces) -> None:
    """The cluster must change: bump generations now, nudge a worker once the transaction commits."""
    _touch(team_namespaces, lambda ids: desired.reconciler().team_namespaces(ids))


def clusters_touch(*, clusters) -> None:
    _touch(clusters, lambda ids: desired.reconciler().clusters(ids))


def _touch(rows, nudge) -> None:
    ids = list(rows.values_list("pk", flat=True))
    if not ids:
        return
    rows.model.objects.filter(pk__in=ids).update(generation=F("generation") + 1, next_attempt_at=lease())
    transaction.on_commit(lambda: nudge(ids))


def reconcile_retry(*, actor, row, source_ip: str | None = None) -> None:
    """An explicit retry after a permanent error: reconcile again as if the row had changed."""
    with transaction.atomic():
        if isinstance(row, Cluster):
            clusters_touch(clusters=Cluster.objects.filter(pk=row.pk))
            team = None
        else:
            team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(pk=row.pk))
            team = row.team
        audit_record(actor=actor, action="reconcile.retry", obj=row, team=team, source_ip=source_ip)
