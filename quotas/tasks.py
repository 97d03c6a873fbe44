from celery import shared_task

from . import services


@shared_task(ignore_result=True)
def quota_expire_due_task() -> None:
    services.quota_expire_due()
