"""Celery tasks: load by id, call the reconcile. Retries are the row's backoff state, read by the due sweep."""

from celery import shared_task

from portal.enqueue import enqueue

from . import reconcile


@shared_task(ignore_result=True)
def team_namespace_reconcile_task(team_namespace_id: int) -> None:
    reconcile.team_namespace_reconcile(team_namespace_id=team_namespace_id)


@shared_task(ignore_result=True)
def cluster_reconcile_task(cluster_id: int) -> None:
    reconcile.cluster_reconcile(cluster_id=cluster_id)


@shared_task(ignore_result=True)
def reconcile_due_task() -> None:
    reconcile.reconcile_due()


@shared_task(ignore_result=True)
def reconcile_sweep_task() -> None:
    reconcile.reconcile_sweep()


class TaskReconciler:
    """What writes below this layer call (through portal.desired) once their transaction commits."""

    def team_namespaces(self, ids: list[int]) -> None:
        for pk in ids:
            enqueue(team_namespace_reconcile_task, pk)

    def clusters(self, ids: list[int]) -> None:
        for pk in ids:
            enqueue(cluster_reconcile_task, pk)
