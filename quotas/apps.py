from django.apps import AppConfig


class QuotasConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'quotas'

    def ready(self):
        from portal import desired

        from . import capacity
        from .desired import CONTRIBUTION

        desired.register(CONTRIBUTION)
        capacity.register()
