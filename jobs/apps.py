from django.apps import AppConfig


def _jobs_due(cluster_ids) -> dict[int, int]:
    """Jobs whose objects are to be created or deleted now, per cluster (the portal's /metrics)."""
    from django.db.models import Count
    from django.utils import timezone

    from .models import Job

    return dict(Job.objects.filter(next_attempt_at__lte=timezone.now(), cluster__in=cluster_ids)
                .values_list("cluster").annotate(n=Count("pk")))


class JobsConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'jobs'

    def ready(self):
        from portal import metrics

        # quotas (below) tells flavors of one resource name apart by the jobs placed on them (see its selectors).
        from quotas import selectors as quota_selectors

        from . import selectors

        metrics.register_due_counter("jobs", _jobs_due)
        quota_selectors.register_jobs_holding(selectors.gpus_held_by_flavor)
