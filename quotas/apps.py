from django.apps import AppConfig


class QuotasConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'quotas'

    def ready(self):
        from .capacity import register

        register()
