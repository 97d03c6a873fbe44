from celery import shared_task

from portal.enqueue import enqueue_coalesced
from tenants.models import Cluster

from . import estimates, services, sync


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
    enqueue_coalesced(job_estimates_refresh_task, cluster_id, key=f"jobs:estimates-refresh:{cluster_id}",
                      within=REFRESH_COALESCE)


@shared_task(ignore_result=True)
def job_estimates_refresh_stale_task() -> list[int]:
    return estimates.job_estimates_refresh_stale()
