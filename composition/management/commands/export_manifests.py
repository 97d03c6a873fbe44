"""Print every object the portal wants in the cluster(s) as multi-document YAML (for review, GitOps, checks)."""

from django.core.management.base import BaseCommand, CommandError

from composition.selectors import prefetched_inputs, team_namespaces_for_reconcile
from portal import yamltext
from portal.desired import cluster_desired, team_namespace_desired
from tenants.desired import tier_specs
from tenants.models import Cluster, TeamNamespace


class Command(BaseCommand):
    help = "Export the desired Kubernetes objects as multi-document YAML on stdout."

    def add_arguments(self, parser):
        parser.add_argument("--team", help="only this team (slug)")
        parser.add_argument("--cluster", help="only this cluster (name)")

    def handle(self, *args, team=None, cluster=None, **options):
        clusters = Cluster.objects.order_by("name")
        if cluster:
            clusters = clusters.filter(name=cluster)
            if not clusters:
                raise CommandError(f"No cluster named {cluster!r}.")
        if team and not TeamNamespace.objects.filter(team__slug=team).exists():
            raise CommandError(f"No team {team!r} with a namespace in any cluster.")
        documents = []
        tiers = tier_specs()
        for each in clusters:
            if not team:
                documents += cluster_desired(cluster=each, tiers=tiers)
            rows = team_namespaces_for_reconcile(cluster=each)
            flavors = list(each.flavors.order_by("name"))
            if team:
                rows = rows.filter(team__slug=team)
            for row in rows:
                documents += team_namespace_desired(team_namespace=row, **prefetched_inputs(row, flavors=flavors))
        self.stdout.write(yamltext.dump_all(documents, explicit_start=True), ending="")
