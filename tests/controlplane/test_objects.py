"""Every object the portal generates for the demo, both schedulers, DRA, shared GPUs and topology included, is
accepted by the real kube-apiserver with the upstream CRDs: a server-side dry run first, then a real apply. Then
the portal's own reconcile takes over the cluster: the sweep finds nothing to write, prunes what is no longer
desired, and a second sweep writes nothing (the audit log shows no write request at all)."""

import pytest
from django.contrib.auth import get_user_model

from composition import reconcile
from portal import kube
from portal.naming import MANAGED_BY, MANAGED_BY_LABEL
from tenants import services as tenant_services
from tenants.manifests import VIEW_BINDING
from tenants.models import Cluster, Team, TeamNamespace
from tests.controlplane import demo
from tools import controlplane

pytestmark = [pytest.mark.controlplane, pytest.mark.django_db]

WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def _register(cluster: Cluster, context: str = controlplane.CONTEXT) -> Cluster:
    Cluster.objects.filter(pk=cluster.pk).update(connection="kubeconfig", server="", context=context)
    cluster.refresh_from_db()
    return cluster


def _kinds(objects):
    return {(o["apiVersion"], o["kind"]) for o in objects}


@pytest.mark.parametrize("name", ["gpu-east", "gpu-west"])
def test_every_demo_object_passes_a_dry_run_then_applies(control_plane, real_cluster, name):
    demo.seed()
    cluster = _register(Cluster.objects.get(name=name))
    objects = sorted(demo.exported(cluster) + demo.job_objects(cluster), key=demo.apply_order)
    kinds = _kinds(objects)
    assert ("resource.k8s.io/v1", "ResourceClaimTemplate") in kinds  # the DRA flavor's jobs
    assert ({("kueue.x-k8s.io/v1beta2", "Topology"), ("batch/v1", "Job"), ("ray.io/v1", "RayJob")} <= kinds
            if cluster.scheduler == "kueue" else
            {("batch.volcano.sh/v1alpha1", "Job"), ("scheduling.volcano.sh/v1beta1", "Queue")} <= kinds), kinds
    client = kube.client_for_cluster(cluster)
    refused = []
    for obj in objects:
        for dry_run in (True, False):
            try:
                client.apply(obj, dry_run=dry_run)
            except kube.KubeError as exc:
                refused.append((obj["kind"], obj["metadata"]["name"], "dry run" if dry_run else "apply", str(exc)))
                break
    assert refused == []
    for obj in objects:  # what was applied is there, as the portal declared it
        live = client.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        assert live is not None and live["metadata"]["labels"].get(MANAGED_BY_LABEL) == MANAGED_BY, obj


def test_reconcile_converges_prunes_and_a_second_sweep_writes_nothing(control_plane, real_cluster):
    demo.seed()
    east = _register(Cluster.objects.get(name="gpu-east"))
    Cluster.objects.exclude(pk=east.pk).update(active=False)  # one cluster per API server
    first = reconcile.reconcile_sweep()
    assert first["errors"] == 0, first
    rows = TeamNamespace.objects.filter(cluster=east).select_related("team")
    assert rows and all(s["state"] == "applied" for row in rows for s in row.objects_status), [
        (row.team.slug, s) for row in rows for s in row.objects_status if s["state"] != "applied"]
    client = kube.client_for_cluster(east)

    # Teams left without viewers: their `view` RoleBindings are no longer desired.
    for slug, username in (("ml-research", "carol"), ("vision", "grace")):
        tenant_services.membership_remove(actor=_admin(), team=Team.objects.get(slug=slug),
                                          user=get_user_model().objects.get(username=username))
    before = {_key(o) for o in _managed(client, east)}
    assert reconcile.reconcile_sweep()["errors"] == 0
    after = {_key(o) for o in _managed(client, east)}
    assert before - after == {("RoleBinding", "ml-research", VIEW_BINDING), ("RoleBinding", "vision", VIEW_BINDING)}

    offset = control_plane.audit_offset()
    second = reconcile.reconcile_sweep()
    writes = [e for e in control_plane.audit_events(offset, user=controlplane.ADMIN_USER) if e["verb"] in WRITES]
    assert writes == []
    assert second["writes"] == 0 and second["errors"] == 0, second


def _key(obj: dict) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _admin():
    return get_user_model().objects.get(username="admin")


def _managed(client, cluster):
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
    kinds = reconcile.team_kinds(cluster) + reconcile.cluster_kinds(cluster)
    return [o for api_version, kind in dict.fromkeys(kinds) for o in client.list(api_version, kind,
                                                                                 label_selector=selector)]
