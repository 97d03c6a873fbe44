"""New topology levels, or new labels on a flavor placed by topology, on a Kueue cluster: Kueue keeps those fields
of a ResourceFlavor as made (kueue v0.19.2 CRD CEL rules), and keeps a flavor while a ClusterQueue lists it and a
Topology while a flavor names it (the resource-in-use finalizer, which the strict sandbox holds as Kueue does). The
reconcile makes such flavors again: out of the queues, let go, back with the new fields."""

import pytest
from django.urls import reverse

from backends import kueue
from backends.kueue_manifests import topology_name
from composition import reconcile
from portal import kube
from tenants import services as tenant_services
from tenants.models import Cluster
from tests.factories import PlatformAdminFactory
from tests.quotas.test_reconcile import KUEUE, grant, reconcile_all, setup_cluster

RACK = {"name": "rack", "node_label": "example.com/rack"}
BLOCK = {"name": "block", "node_label": "example.com/block"}
HOST = {"name": "host", "node_label": "kubernetes.io/hostname"}
FINALIZER = "kueue.x-k8s.io/resource-in-use"


def flavor(name, labels, topology=None, deleting=False, tolerations=None):
    spec = {"nodeLabels": labels} | ({"topologyName": topology} if topology else {}) | (
        {"tolerations": tolerations} if tolerations else {})
    meta = {"name": name} | ({"deletionTimestamp": "2026-11-25T00:00:00Z"} if deleting else {})
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": meta, "spec": spec}


def test_which_flavors_must_be_made_again():
    pool = {"example.com/pool": "a"}
    live = [flavor("same", pool, "t1"), flavor("moved", pool, "t1"), flavor("relabelled", pool, "t1"),
            flavor("plain", pool), flavor("going", pool, deleting=True),
            flavor("tolerant", pool, "t1", tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])]
    desired = [flavor("same", pool, "t1"), flavor("moved", pool, "t2"), flavor("relabelled", {"x.io/y": "b"}, "t1"),
               flavor("plain", {"example.com/pool": "b"}, "t2"), flavor("going", pool), flavor("tolerant", pool, "t1"),
               flavor("new", pool, "t2")]
    # "plain" had no topologyName: Kueue lets it take one, and new labels, by an update.
    assert kueue.flavors_to_remake(desired, live) == ["going", "moved", "relabelled", "tolerant"]
    assert [o["metadata"]["name"] for o in kueue.without(desired, ["moved"])] == [
        "same", "relabelled", "plain", "going", "tolerant", "new"]


def live(cluster, kind, name):
    return kube.client_for_cluster(cluster).get(KUEUE, kind, name)


def queue_flavors(cluster):
    cq = kube.client_for_cluster(cluster).get(KUEUE, "ClusterQueue", "nlp")
    return [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]


@pytest.mark.django_db
def test_new_levels_on_a_kueue_cluster_make_its_topology_aware_flavors_again(strict_sandbox, client):
    cluster, team, _row, h100, _mig = setup_cluster(strict_sandbox.url, "kueue")
    h100.node_labels = {"example.com/pool": "h100"}
    h100.save()
    grant(team, h100, 8, 0)
    admin = PlatformAdminFactory()
    tenant_services.cluster_update(actor=admin, cluster=cluster, topology_levels=[RACK, HOST])
    reconcile_all(cluster)
    before = topology_name([RACK["node_label"], HOST["node_label"]])
    assert live(cluster, "ResourceFlavor", "h100")["spec"]["topologyName"] == before
    assert live(cluster, "Topology", before)["metadata"]["finalizers"] == [FINALIZER]

    cluster.refresh_from_db()
    tenant_services.cluster_update(actor=admin, cluster=cluster, topology_levels=[BLOCK, RACK, HOST])
    after = topology_name([BLOCK["node_label"], RACK["node_label"], HOST["node_label"]])
    reconcile.cluster_reconcile(cluster_id=cluster.pk)
    cluster.refresh_from_db()
    assert cluster.replacing_flavors == ["h100", "mig-1g"]  # both placed by topology
    assert live(cluster, "ResourceFlavor", "h100")["metadata"]["deletionTimestamp"]  # a queue still lists it
    assert live(cluster, "Topology", before)["metadata"]["deletionTimestamp"]  # a flavor still names it
    assert live(cluster, "Topology", after)["spec"]["levels"][0] == {"nodeLabel": "example.com/block"}
    assert "h100" in queue_flavors(cluster)
    client.force_login(admin)
    page = client.get(reverse("tenants:cluster-detail", args=[cluster.name])).content.decode()
    assert "Being made again in the cluster: h100, mig-1g." in page

    for _ in range(4):  # the sweep: the team's queue lets go, Kueue removes the flavor, the flavor comes back
        if reconcile.reconcile_sweep()["writes"] == 0:
            break
    cluster = Cluster.objects.get(pk=cluster.pk)
    assert cluster.replacing_flavors == [] and cluster.sync_state == "applied", cluster.sync_message
    assert live(cluster, "ResourceFlavor", "h100")["spec"]["topologyName"] == after
    assert live(cluster, "Topology", before) is None
    assert "h100" in queue_flavors(cluster)
    assert reconcile.reconcile_sweep()["writes"] == 0

    h100.refresh_from_db()
    h100.node_labels = {"example.com/pool": "h100", "example.com/gen": "hopper"}  # labels of a TAS flavor
    tenant_services.gpu_flavor_save(actor=admin, flavor=h100)
    for _ in range(4):
        if reconcile.reconcile_sweep()["writes"] == 0:
            break
    assert live(cluster, "ResourceFlavor", "h100")["spec"]["nodeLabels"]["example.com/gen"] == "hopper"
    assert "h100" in queue_flavors(cluster)
