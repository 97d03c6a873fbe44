"""A cluster's usage source (billing's one-to-one row: its Prometheus URL and scrape setup) is registered, changed,
audited and shown with the cluster, and every cluster has one, those from before the table included."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from billing.models import ClusterUsageSource
from tenants import services
from tenants.models import AuditEvent, Cluster
from tests.factories import ClusterFactory, PlatformAdminFactory

pytestmark = pytest.mark.django_db
REGISTER = reverse("tenants:cluster-create")


def registration(server, **extra):
    return {"name": "north", "display_name": "GPU North", "scheduler": "kueue", "connection": "sandbox",
            "server": server, "cohort": "north", "overcommit": "1.00", "save": "1", **extra}


def test_the_prometheus_url_is_registered_with_the_cluster_and_audited(admin_client, sandbox):
    page = admin_client.get(REGISTER).content.decode()
    assert 'name="prometheus_url"' in page and 'name="scrape_shape"' not in page  # the admin page sets the shape
    assert page.index('name="prometheus_url"') < page.index('name="topology_levels"')

    bad = admin_client.post(REGISTER, registration(sandbox.url, prometheus_url="not a url"))
    assert bad.status_code == 400 and 'id="id_prometheus_url-error"' in bad.content.decode()
    assert not Cluster.objects.exists()

    saved = admin_client.post(REGISTER, registration(sandbox.url, prometheus_url="http://prometheus.example:9090"))
    assert saved.status_code == 302
    source = ClusterUsageSource.objects.get(cluster__name="north")
    assert (source.prometheus_url, source.scrape_shape) == ("http://prometheus.example:9090", "")
    event = AuditEvent.objects.get(action="cluster.create")
    assert event.after["prometheus_url"] == "http://prometheus.example:9090" and event.after["scrape_shape"] == ""
    detail = admin_client.get(reverse("tenants:cluster-detail", args=["north"])).content.decode()
    assert "http://prometheus.example:9090" in detail and "not seen yet" in detail


def test_every_cluster_registered_gets_its_usage_source():
    cluster = services.cluster_create(actor=PlatformAdminFactory(), name="bare", connection="sandbox",
                                      server="http://127.0.0.1:9")
    source = ClusterUsageSource.objects.get(cluster=cluster)
    assert (source.prometheus_url, source.scrape_shape, source.scrape_shape_seen) == ("", "", "")


def test_the_admin_page_changes_the_usage_source_through_the_service(admin_client):
    cluster = ClusterFactory(name="east", usage_source__prometheus_url="http://old.example:9090")
    url = f"/django-admin/tenants/cluster/{cluster.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert 'value="http://old.example:9090"' in page and 'name="scrape_shape"' in page

    form = {"name": "east", "display_name": "", "connection": "sandbox", "server": cluster.server, "context": "",
            "scheduler": "kueue", "cohort": "gpu", "overcommit": "1.00", "mig_strategy": cluster.mig_strategy,
            "topology_levels": "[]", "active": "on", "prometheus_url": "http://new.example:9090",
            "scrape_shape": "direct"}
    assert admin_client.post(url, form).status_code == 302
    source = ClusterUsageSource.objects.get(cluster=cluster)
    assert (source.prometheus_url, source.scrape_shape) == ("http://new.example:9090", "direct")
    event = AuditEvent.objects.get(action="cluster.update")
    assert (event.before["prometheus_url"], event.after["prometheus_url"]) == ("http://old.example:9090",
                                                                                "http://new.example:9090")
    assert (event.before["scrape_shape"], event.after["scrape_shape"]) == ("", "direct")


def test_the_cluster_page_reads_the_usage_source_with_the_cluster(admin_client):
    ClusterFactory(name="east", usage_source__prometheus_url="http://prometheus.example:9090")
    url = reverse("tenants:cluster-detail", args=["east"])
    with CaptureQueriesContext(connection) as captured:
        assert "http://prometheus.example:9090" in admin_client.get(url).content.decode()
    reads = [q["sql"] for q in captured.captured_queries if "billing_clusterusagesource" in q["sql"]]
    assert len(reads) == 1 and '"tenants_cluster"' in reads[0]  # joined to the cluster, not a query of its own


@pytest.mark.django_db(transaction=True)
def test_the_migration_copies_every_clusters_values_into_its_usage_source():
    before = [("billing", "0006_job_idle_watch"), ("tenants", "0013_prioritytier_budget_hold_action")]
    after = [("billing", "0007_cluster_usage_source"), ("tenants", "0014_cluster_usage_source_moved")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("tenants", "Cluster")
    old.objects.create(name="east", server="http://127.0.0.1:9", prometheus_url="http://prom.example:9090",
                       scrape_shape="exported", scrape_shape_seen="exported")
    old.objects.create(name="west", server="http://127.0.0.1:9")

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    rows = {row.cluster.name: row for row in ClusterUsageSource.objects.select_related("cluster")}
    assert set(rows) == {"east", "west"}
    assert (rows["east"].prometheus_url, rows["east"].scrape_shape, rows["east"].scrape_shape_seen) == (
        "http://prom.example:9090", "exported", "exported")
    assert (rows["west"].prometheus_url, rows["west"].scrape_shape) == ("", "")

    executor = MigrationExecutor(connection)
    executor.migrate(before)  # and back: the values return to the cluster rows
    old = executor.loader.project_state(before).apps.get_model("tenants", "Cluster")
    assert old.objects.get(name="east").prometheus_url == "http://prom.example:9090"
    MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
