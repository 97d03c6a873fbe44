from django.apps import AppConfig


class TenantsConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'tenants'

    def ready(self):
        from portal import desired

        from .desired import CONTRIBUTION

        desired.register(CONTRIBUTION)
