from django.apps import AppConfig


class CompositionConfig(AppConfig):
    """The layer above every app: reconciles team namespaces and clusters against the state every app
    contributes (portal.desired), and serves the health checks and the demo's wiring and seeding that span the apps
    (composition.demo)."""

    default_auto_field = 'django.db.models.BigAutoField'
    name = 'composition'

    def ready(self):
        from portal import desired

        from .demo import plug_in
        from .tasks import TaskReconciler

        desired.set_reconciler(TaskReconciler())
        plug_in()
        _count_task_outcomes()


def _count_task_outcomes() -> None:
    """Every Celery task's outcome, counted for /metrics (portal.metrics.task_outcome)."""
    from celery import signals

    from portal.metrics import task_outcome

    def outcome(name):
        return lambda sender=None, **kwargs: task_outcome(getattr(sender, "name", str(sender)), name)

    for signal, name in ((signals.task_success, "succeeded"), (signals.task_failure, "failed"),
                         (signals.task_retry, "retried")):
        signal.connect(outcome(name), weak=False, dispatch_uid=f"gpu-portal-task-{name}")
