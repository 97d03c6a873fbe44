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

        metrics.register_due_counter("jobs", _jobs_due)
