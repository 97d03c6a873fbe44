from celery import shared_task

from . import reservations, services


@shared_task(ignore_result=True)
def quota_expire_due_task() -> None:
    services.quota_expire_due()


@shared_task(ignore_result=True)
def reservation_apply_due_task() -> None:
    reservations.reservation_apply_due()
