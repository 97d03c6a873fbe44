from django.apps import AppConfig


class BillingConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'billing'

    def ready(self):
        # The job form (jobs, a layer below) prices a job at today's rates from here.
        from jobs import cost

        from .pricing import unit_prices_now

        cost.register_unit_prices(unit_prices_now)
