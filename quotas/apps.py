from django.apps import AppConfig


class QuotasConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'quotas'

    def ready(self):
        from portal import desired, kube

        from . import capacity
        from .desired import CONTRIBUTION
        from .manifests import volcano_queue_refusal_waits

        desired.register(CONTRIBUTION)
        if volcano_queue_refusal_waits not in kube.RETRIED_REFUSALS:
            kube.RETRIED_REFUSALS.append(volcano_queue_refusal_waits)
        capacity.register()
