"""Print every object the portal wants in the cluster(s) as multi-document YAML (for review, GitOps, checks)."""

from django.core.management.base import BaseCommand, CommandError

from composition.selectors import prefetched_inputs, team_namespaces_for_reconcile
from portal import yamltext
from portal.desired import cluster_desired, shared_inputs, team_namespace_desired
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
        for each in clusters:
            shared = shared_inputs(cluster=each)
            if not team:
                documents += cluster_desired(cluster=each, **shared)
            rows = team_namespaces_for_reconcile(cluster=each)
            if team:
                rows = rows.filter(team__slug=team)
            for row in rows:
                documents += team_namespace_desired(team_namespace=row, **prefetched_inputs(row, shared=shared))
        self.stdout.write(yamltext.dump_all(documents, explicit_start=True), ending="")
