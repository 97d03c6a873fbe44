from celery import shared_task
from django.utils import timezone

from tenants.models import Cluster

from . import services
from .models import Job


@shared_task(ignore_result=True)
def job_reconcile_task(job_id: int) -> None:
    services.job_reconcile(job_id=job_id)


@shared_task(ignore_result=True)
def job_reconcile_due_task() -> None:
    """Jobs whose objects were not created or deleted yet (a lost nudge, or a transient error)."""
    for pk in Job.objects.filter(next_attempt_at__lte=timezone.now()).values_list("pk", flat=True)[:500]:
        services.job_reconcile(job_id=pk)


@shared_task(ignore_result=True)
def job_status_sync_task() -> None:
    for cluster in Cluster.objects.filter(active=True):
        services.job_status_sync(cluster=cluster)
