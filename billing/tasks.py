"""Celery tasks: load by id, call the service."""

from datetime import datetime

from celery import shared_task
from django.db import DatabaseError

from tenants.models import Cluster

from . import budgets, enforce, services


@shared_task(ignore_result=True)
def budget_check_task() -> int:
    """Hourly: alert the teams whose spend this month crossed a budget threshold."""
    return budgets.budget_check_due()


# Enforcement: every minute (the hold lifts as the window rolls) and after each change to a budget, allowance or
# override; one pass is cheap when nothing changed (it writes nothing).
@shared_task(ignore_result=True)
def budget_enforce_task() -> dict:
    return enforce.budget_enforce()


# Collection: the hourly run collects the last hour and backfills the window; a database hiccup retries the run.
@shared_task(bind=True, ignore_result=True, max_retries=3, default_retry_delay=120)
def usage_collect_task(self) -> dict[str, int]:
    try:
        return services.usage_collect_due()
    except DatabaseError as exc:
        raise self.retry(exc=exc) from exc


@shared_task(ignore_result=True)
def usage_collect_hour_task(cluster_id: int, hour: str) -> str:
    """Re-collect one hour on request (the admin's action); the ledger row records the outcome."""
    cluster = Cluster.objects.select_related("usage_source").get(pk=cluster_id)
    return services.usage_collect_hour(cluster=cluster, hour=datetime.fromisoformat(hour)).state


@shared_task(ignore_result=True)
def job_idle_rule_task() -> dict:
    """Warn (and where the tier allows, stop) running batch jobs whose GPUs do no work."""
    from .idle_rule import job_idle_rule_all

    return job_idle_rule_all()
