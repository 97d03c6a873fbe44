from django.apps import AppConfig


class BillingConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'billing'

    def ready(self):
        # A cluster is registered and changed with its usage source (tenancy, below, keeps the cluster).
        from tenants import cluster_parts

        from .forms import usage_source_fields
        from .services import cluster_usage_source_save, cluster_usage_source_values

        cluster_parts.register(cluster_parts.ClusterPart(
            related_name="usage_source", form_fields=usage_source_fields, registration_fields=("prometheus_url",),
            values=cluster_usage_source_values, save=cluster_usage_source_save))

        # The job form (jobs, a layer below) prices a job at today's rates from here.
        from jobs import cost

        from .pricing import unit_prices_now

        cost.register_unit_prices(unit_prices_now)

        # The quota app (below) lists the portal's budget check on the queues of teams under enforcement, and the
        # job reconcile (below) keeps a held team's jobs where its scheduler would refuse them.
        from jobs import holds as job_holds
        from quotas import desired

        from .enforce import budget_checks_for, budget_enforce, job_held_by_budget, team_held_by_budget

        desired.register_admission_checks(budget_checks_for)
        job_holds.register(job_held_by_budget, team_held_by_budget)
        job_holds.register_decider(budget_enforce)
        # A job sent just before its team's queue closed is refused by Volcano's webhook: it waits, not fails.
        from backends.volcano_manifests import closed_queue_refusal
        from portal import kube

        if closed_queue_refusal not in kube.RETRIED_REFUSALS:
            kube.RETRIED_REFUSALS.append(closed_queue_refusal)
