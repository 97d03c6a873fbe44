"""Celery tasks of the tenancy app. The reconcile tasks live in composition/, above every contributing app."""

import random

from celery import shared_task
from django.core.mail import send_mail


@shared_task(bind=True, ignore_result=True, max_retries=5, default_retry_delay=60)
def send_email_task(self, subject: str, body: str, recipients: list[str]) -> None:
    try:
        send_mail(subject, body, None, recipients)
    except OSError as exc:
        raise self.retry(exc=exc) from exc


@shared_task(ignore_result=True)
def idempotency_keys_prune_task() -> None:
    from .idempotency import idempotency_keys_prune

    idempotency_keys_prune()


@shared_task(bind=True, ignore_result=True, max_retries=6)
def webhook_deliver_task(self, delivery_id: int) -> None:
    """Deliver one notice; retried with capped, jittered exponential backoff while the receiver fails."""
    from .webhooks import DeliveryFailed, webhook_deliver

    try:
        webhook_deliver(delivery_id=delivery_id)
    except DeliveryFailed as exc:
        raise self.retry(exc=exc, countdown=min(600, 10 * 2 ** self.request.retries) + random.uniform(0, 5)) from exc
