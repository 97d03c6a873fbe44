import logging

from celery import shared_task
from django.core.cache import cache

from portal.metrics import ENQUEUE_FAILURES
from tenants.models import Cluster

from . import estimates, services, sync

log = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def job_reconcile_task(job_id: int) -> None:
    services.job_reconcile(job_id=job_id)


@shared_task(ignore_result=True)
def job_reconcile_due_task() -> None:
    """Jobs whose objects were not created or deleted yet (a lost nudge, or a transient error)."""
    services.job_reconcile_due()


@shared_task(ignore_result=True)
def job_status_sync_task() -> dict:
    return sync.job_status_sync_all()


@shared_task(ignore_result=True)
def job_estimates_refresh_task(cluster_id: int) -> None:
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is not None:
        estimates.job_estimates_refresh(cluster=cluster)


REFRESH_COALESCE = 2  # seconds: the changes of a busy cluster within this share one refresh


def job_estimates_refresh_soon(cluster_id: int) -> None:
    """One refresh of the cluster's estimates for however many changes come within REFRESH_COALESCE seconds. Never
    raises (it runs once the change is committed, often in a request): a refresh lost with the broker is made by
    the next change, or by the sweep of estimates that time overtook."""
    try:
        if cache.add(f"jobs:estimates-refresh:{cluster_id}", 1, timeout=REFRESH_COALESCE):
            job_estimates_refresh_task.apply_async((cluster_id,), countdown=REFRESH_COALESCE)
    except Exception as exc:  # noqa: BLE001 - redis and kombu errors alike, as portal.enqueue treats them
        log.warning("could not queue a refresh of cluster %s's estimates (%s: %s)", cluster_id,
                    type(exc).__name__, exc)
        ENQUEUE_FAILURES.labels(job_estimates_refresh_task.name).inc()


@shared_task(ignore_result=True)
def job_estimates_refresh_stale_task() -> list[int]:
    return estimates.job_estimates_refresh_stale()
