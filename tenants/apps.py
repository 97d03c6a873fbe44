from django.apps import AppConfig


class TenantsConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'tenants'

    def ready(self):
        from portal import desired

        from .desired import CONTRIBUTION

        desired.register(CONTRIBUTION)

        from axes.signals import user_locked_out

        from .lockout import record_lockout

        user_locked_out.connect(record_lockout, dispatch_uid="tenants.lockout.record_lockout")
