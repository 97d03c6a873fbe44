from django.apps import AppConfig


class JobsConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'jobs'

    def ready(self):
        # quotas (below) tells flavors of one resource name apart by the jobs placed on them (see its selectors).
        from quotas import selectors as quota_selectors

        from . import selectors

        quota_selectors.register_jobs_holding(selectors.gpus_held_by_flavor)
