from celery import shared_task

from . import culling, services


@shared_task(ignore_result=True)
def workspace_reconcile_task(workspace_id: int) -> None:
    services.workspace_reconcile(workspace_id=workspace_id)


@shared_task(ignore_result=True)
def workspace_reconcile_due_task() -> None:
    """Workspaces whose volume, Service or Ingress were not applied yet (a lost nudge, a transient error)."""
    services.workspace_reconcile_due()


@shared_task(ignore_result=True)
def workspace_cull_task() -> dict:
    return culling.workspace_cull_all()
