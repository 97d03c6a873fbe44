"""A platform admin registers a cluster from the console: a connection test first (what was typed is kept), then
the cluster and every team's namespace in it."""

import pytest
from django.urls import reverse

from tenants.models import Cluster, TeamNamespace
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db
URL = reverse("tenants:cluster-create")


def fields(server, **extra):
    return {"name": "north", "display_name": "GPU North", "scheduler": "kueue", "connection": "sandbox",
            "server": server, "cohort": "north", "overcommit": "1.00", **extra}


def test_test_the_connection_then_register(admin_client, sandbox):
    team = TeamFactory(slug="nlp")
    page = admin_client.get(URL)
    assert page.status_code == 200 and "generation" not in page.content.decode().lower()

    tested = admin_client.post(URL, fields(sandbox.url, test="1"))
    text = tested.content.decode()
    assert tested.status_code == 200 and "Connected: the API server answered" in text
    assert 'value="GPU North"' in text and not Cluster.objects.exists()  # kept, not saved

    down = admin_client.post(URL, fields("http://127.0.0.1:9", test="1"))
    assert "Could not connect" in down.content.decode() and not Cluster.objects.exists()

    saved = admin_client.post(URL, fields(sandbox.url, save="1"))
    assert saved.status_code == 302 and saved["Location"] == reverse("tenants:cluster-detail", args=["north"])
    cluster = Cluster.objects.get(name="north")
    assert (cluster.display_name, cluster.server) == ("GPU North", sandbox.url)
    assert TeamNamespace.objects.filter(team=team, cluster=cluster).exists()


def test_errors_sit_beside_their_fields(admin_client):
    page = admin_client.post(URL, fields("", name="Not A Name", save="1"))
    text = page.content.decode()
    assert page.status_code == 400 and not Cluster.objects.exists()
    assert 'id="id_server-error"' in text and "needs its API server URL" in text
    assert 'id="id_name-error"' in text and 'value="Not A Name"' in text


def test_topology_levels_are_registered_with_the_cluster_and_checked(admin_client, sandbox):
    levels = '[{"name": "rack", "node_label": "kubernetes.io/hostname"}, {"name": "host", "node_label": "x/rack"}]'
    page = admin_client.post(URL, fields(sandbox.url, save="1", topology_levels=levels))
    assert page.status_code == 400 and "can only be the lowest" in page.content.decode()
    levels = '[{"name": "rack", "node_label": "topology.example.com/rack"}]'
    saved = admin_client.post(URL, fields(sandbox.url, save="1", topology_levels=levels))
    assert saved.status_code == 302
    assert Cluster.objects.get(name="north").topology_levels == [
        {"name": "rack", "node_label": "topology.example.com/rack"}]
