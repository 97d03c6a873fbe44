"""Celery tasks: load by id, call the service. Retries are the row's backoff state, read by the due sweep."""

from celery import shared_task

from . import services


@shared_task(ignore_result=True)
def team_namespace_reconcile_task(team_namespace_id: int) -> None:
    services.team_namespace_reconcile(team_namespace_id=team_namespace_id)


@shared_task(ignore_result=True)
def cluster_reconcile_task(cluster_id: int) -> None:
    services.cluster_reconcile(cluster_id=cluster_id)


@shared_task(ignore_result=True)
def reconcile_due_task() -> None:
    services.reconcile_due()


@shared_task(ignore_result=True)
def reconcile_sweep_task() -> None:
    services.reconcile_sweep()


@shared_task(bind=True, ignore_result=True, max_retries=5, default_retry_delay=60)
def send_email_task(self, subject: str, body: str, recipients: list[str]) -> None:
    from django.core.mail import send_mail

    try:
        send_mail(subject, body, None, recipients)
    except OSError as exc:
        raise self.retry(exc=exc) from exc
