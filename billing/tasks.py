"""Celery tasks: load by id, call the service."""

from celery import shared_task

from . import services


@shared_task(ignore_result=True)
def budget_check_task() -> int:
    """Hourly: alert the teams whose spend this month crossed a budget threshold."""
    return services.budget_check_due()
