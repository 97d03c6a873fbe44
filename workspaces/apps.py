from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workspaces"

    def ready(self):
        # A workspace's run is a job: the jobs app (below) builds it, with what this app adds to its pod.
        from jobs import selectors as job_selectors
        from jobs.choices import JobKind

        from . import selectors

        job_selectors.SPEC_EXTRAS[JobKind.WORKSPACE] = selectors.run_spec_fields
