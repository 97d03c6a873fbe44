from django.apps import AppConfig


class CompositionConfig(AppConfig):
    """The layer above every app: reconciles team namespaces and clusters against the state every app
    contributes (portal.desired), and serves the health checks and demo seeding that span the apps."""

    default_auto_field = 'django.db.models.BigAutoField'
    name = 'composition'

    def ready(self):
        from portal import desired

        from .tasks import TaskReconciler

        desired.set_reconciler(TaskReconciler())
