from celery import shared_task

from tenants.selectors import active_clusters

from . import selectors, services


@shared_task(ignore_result=True)
def job_reconcile_task(job_id: int) -> None:
    services.job_reconcile(job_id=job_id)


@shared_task(ignore_result=True)
def job_reconcile_due_task() -> None:
    """Jobs whose objects were not created or deleted yet (a lost nudge, or a transient error)."""
    for pk in selectors.jobs_due():
        services.job_reconcile(job_id=pk)


@shared_task(ignore_result=True)
def job_status_sync_task() -> None:
    for cluster in active_clusters():
        services.job_status_sync(cluster=cluster)
