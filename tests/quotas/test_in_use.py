""""In use" comes from what the cluster reports (the ResourceQuota's status, Kueue's ClusterQueue and Volcano's
Queue status), and a quota the cluster does not hold as the database does says so. The sandbox's quota controller
keeps the ResourceQuota's status from the namespace's pods (a status written by hand stands until the namespace
changes, as between a real controller's resyncs); the schedulers' queue status is written by each test as Kueue's and
Volcano's controllers would."""

import pytest
from django.urls import reverse

from composition import reconcile
from portal import kube
from quotas import selectors, usage
from tenants.models import TeamNamespace
from tests.quotas.test_reconcile import KUEUE, VOLCANO, grant, reconcile_all, setup_cluster

pytestmark = pytest.mark.django_db


def set_status(cluster, api_version, kind, name, namespace, status):
    api = kube.client_for_cluster(cluster)
    path = kube.path_for(api_version, kind, namespace, name) + "/status"
    api._call("PATCH", path, body={"status": status}, content_type="application/merge-patch+json")


def run_pods(cluster, namespace, gpus_each, count):
    """Pods holding GPUs, as running jobs' pods would: the quota controller counts them into status.used."""
    api = kube.client_for_cluster(cluster)
    resources = {"limits": {"nvidia.com/gpu": str(gpus_each), "cpu": "1", "memory": "1Gi"}}
    for i in range(count):
        api._call("POST", kube.path_for("v1", "Pod", namespace, None), body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"worker-{i}"},
            "spec": {"containers": [{"name": "main", "image": "trainer:1", "resources": resources}]}})


def quota_page(client, team):
    client.force_login(team.memberships.first().user)
    return client.get(reverse("quotas:team-quota", args=[team.slug])).content.decode()


def held(team):
    return {(h.quota.flavor.name): h for h in selectors.team_held_quotas(team=team)}


def test_kueue_in_use_per_flavor_from_the_cluster_queue(sandbox, client):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 16, 4)
    grant(team, mig, 7, 0)
    reconcile_all(cluster)
    set_status(cluster, "v1", "ResourceQuota", "gpu-portal-quota", "nlp", {
        "hard": {"requests.nvidia.com/gpu": "20", "requests.nvidia.com/mig-1g.10gb": "7", "requests.cpu": "184"},
        "used": {"requests.nvidia.com/gpu": "16", "requests.nvidia.com/mig-1g.10gb": "3", "requests.cpu": "40"}})
    set_status(cluster, KUEUE, "ClusterQueue", "nlp", None, {"flavorsUsage": [
        {"name": "h100", "resources": [{"name": "cpu", "total": "32", "borrowed": "0"},
                                       {"name": "nvidia.com/gpu", "total": "16", "borrowed": "0"},
                                       {"name": "nvidia.com/mig-1g.10gb", "total": "0", "borrowed": "0"}]},
        {"name": "mig-1g", "resources": [{"name": "cpu", "total": "8", "borrowed": "0"},
                                         {"name": "nvidia.com/gpu", "total": "0", "borrowed": "0"},
                                         {"name": "nvidia.com/mig-1g.10gb", "total": "3", "borrowed": "0"}]}]})
    assert reconcile.reconcile_sweep()["writes"] == 0  # reading status writes nothing to the cluster
    rows = held(team)
    assert (rows["h100"].in_use, rows["mig-1g"].in_use) == (16, 3)
    assert rows["h100"].not_applied == rows["mig-1g"].not_applied == ""
    capacity = {u.flavor.name: u.in_use for u in selectors.capacity_overview(cluster=cluster)}
    assert capacity == {"h100": 16, "mig-1g": 3}
    page = quota_page(client, team)
    assert "not applied" not in page
    client.force_login(team.memberships.first().user)
    api = client.get(f"/api/v1/teams/{team.slug}/quotas/").json()["results"]
    assert sorted((q["in_use_units"], q["not_applied"]) for q in api) == [(3, ""), (16, "")]


def test_volcano_in_use_from_the_queue_allocation(sandbox):
    """Volcano's Queue `allocated` counts the pods it has placed; the ResourceQuota's `used` also counts pods still
    pending (a job let into its queue, an evicted job restarted), so on the real Volcano a reclaimed team read 16 in
    use while 8 ran. The queue's count comes first; the ResourceQuota's is the fallback."""
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "volcano")
    grant(team, h100, 16, 0)
    reconcile_all(cluster)
    run_pods(cluster, "nlp", 6, 2)
    set_status(cluster, VOLCANO, "Queue", "nlp", None, {"allocated": {"nvidia.com/gpu": "12"}, "state": "Open"})
    reconcile.reconcile_sweep()
    assert held(team)["h100"].in_use == 12  # the pods' 12 GPUs, which the queue's allocation agrees with
    set_status(cluster, "v1", "ResourceQuota", "gpu-portal-quota", "nlp", {
        "hard": {"requests.nvidia.com/gpu": "16", "requests.nvidia.com/mig-1g.10gb": "0"},
        "used": {"requests.nvidia.com/gpu": "16", "requests.nvidia.com/mig-1g.10gb": "0"}})
    reconcile.reconcile_sweep()
    assert held(team)["h100"].in_use == 12  # 4 more GPUs asked for by pods Volcano has not placed


def test_volcano_in_use_falls_back_to_the_resource_quota(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "volcano")
    status = {"allocated": {"nvidia.com/gpu": 12}}
    assert selectors.in_use(flavor=h100, scheduler="volcano", quota_status=status) == 12
    counted = {**status, "used": {"nvidia.com/gpu": 16}}
    assert selectors.in_use(flavor=h100, scheduler="volcano", quota_status=counted) == 12
    assert selectors.in_use(flavor=h100, scheduler="volcano", quota_status={"used": {"nvidia.com/gpu": 4}}) == 4


def test_a_quota_the_cluster_enforces_otherwise_or_rejected_says_so(sandbox, client):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 16, 4)
    reconcile_all(cluster)
    # What the last sweep read from a cluster whose ResourceQuota still enforced an older limit.
    TeamNamespace.objects.filter(team=team, cluster=cluster).update(
        quota_status={"hard": {"nvidia.com/gpu": 12}, "used": {"nvidia.com/gpu": 12}})
    assert "enforces 12 nvidia.com/gpu, not the 20 the portal holds" in held(team)["h100"].not_applied
    assert "not applied" in quota_page(client, team)

    sandbox.faults.add(verb="apply", resource="resourcequotas", status=422, reason="Invalid",
                       message="exceeded quota of the cluster admin", count=None)
    grant(team, h100, 24, 4)
    row = TeamNamespace.objects.get(team=team, cluster=cluster)
    reconcile.team_namespace_reconcile(team_namespace_id=row.pk)
    reason = held(team)["h100"].not_applied
    assert reason.startswith("Rejected by the cluster:") and "exceeded quota of the cluster admin" in reason
    assert "exceeded quota of the cluster admin" in quota_page(client, team)


def test_only_what_the_cluster_reported_is_recorded():
    uncounted = {"kind": "ResourceQuota", "status": {}}
    assert usage.quota_status_from([uncounted]) == {}  # nothing to record, so a sweep writes no row
    counted = {"kind": "ResourceQuota", "status": {"hard": {"requests.nvidia.com/gpu": "8", "requests.cpu": "64"},
                                                   "used": {"requests.nvidia.com/gpu": "1k"}}}
    assert usage.quota_status_from([counted]) == {"hard": {"nvidia.com/gpu": 8}, "used": {"nvidia.com/gpu": 1000}}
