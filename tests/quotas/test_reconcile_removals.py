"""What the portal stops wanting leaves the cluster: give-backs, retired fields and removed flavors, for every
kind the portal owns (team-scoped and cluster-wide), found by the periodic sweep alone."""

import pytest

from composition import reconcile
from portal import kube
from portal.desired import cluster_desired, team_namespace_desired
from portal.reconcile import with_applied_hash
from quotas import services
from quotas.models import Quota
from tenants import services as tenant_services
from tenants.choices import Role
from tenants.desired import tier_specs
from tenants.models import GpuFlavor, Membership, PriorityTier, Team, TeamNamespace
from tests.factories import (
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
)
from tests.quotas.test_reconcile import KUEUE, VOLCANO, get, grant, reconcile_all, setup_cluster

pytestmark = pytest.mark.django_db
RETIRED = "gpu-portal.io/retired"

KINDS = {
    "kueue": {"Namespace", "ResourceQuota", "LimitRange", "RoleBinding", "NetworkPolicy", "ClusterQueue",
              "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass", "Cohort", "PriorityClass", "AdmissionCheck"},
    "volcano": {"Namespace", "ResourceQuota", "LimitRange", "RoleBinding", "NetworkPolicy", "Queue",
                "PriorityClass"},
}


def desired_everywhere(cluster):
    objects = cluster_desired(cluster=cluster, tiers=tier_specs())
    for row in TeamNamespace.objects.filter(cluster=cluster).select_related("team", "cluster"):
        objects += team_namespace_desired(team_namespace=row)
    return objects


def sweep_converges(cluster, sandbox):
    """Sweeps repair until one finds nothing to write (at most three: shrinking Volcano's hierarchical queues,
    the cluster-wide department queue is refused while a team queue under it is still larger, and is applied by
    the next sweep once the team queue shrank), and then a sweep writes nothing."""
    for _ in range(3):
        if reconcile.reconcile_sweep()["writes"] == 0:
            break
    sandbox.reset_stats()
    assert reconcile.reconcile_sweep()["writes"] == 0
    assert sandbox.stats()["writes"] == 0


@pytest.mark.parametrize("scheduler", ["kueue", "volcano"])
def test_a_field_the_portal_no_longer_declares_leaves_every_kind(sandbox, scheduler):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, scheduler)
    grant(team, h100, 8, 4)
    reconcile_all(cluster)
    client = kube.client_for_cluster(cluster)
    desired = desired_everywhere(cluster)
    assert {o["kind"] for o in desired} == KINDS[scheduler]
    for obj in desired:
        # What an older portal applied: the same object plus a label it declared then and no longer does.
        older = with_applied_hash(obj)
        older["metadata"] = {**older["metadata"], "labels": {**older["metadata"]["labels"], RETIRED: "yes"}}
        client.apply(older)
    sweep_converges(cluster, sandbox)
    for obj in desired:
        meta = obj["metadata"]
        live = client.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        assert RETIRED not in live["metadata"]["labels"], (obj["kind"], meta["name"])


def test_cpu_given_back_leaves_the_resource_quota_and_the_queue(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "volcano")
    grant(team, h100, 8, 4)
    reconcile_all(cluster)
    assert get(cluster, "v1", "ResourceQuota", "gpu-portal-quota", "nlp")["spec"]["hard"]["requests.cpu"] == "64"
    services.quota_set(actor=PlatformAdminFactory(), team=team, flavor=h100, guaranteed=8, burst=4)
    sweep_converges(cluster, sandbox)
    hard = get(cluster, "v1", "ResourceQuota", "gpu-portal-quota", "nlp")["spec"]["hard"]
    assert "requests.cpu" not in hard and "requests.memory" not in hard
    assert set(get(cluster, VOLCANO, "Queue", "nlp")["spec"]["capability"]) == {"nvidia.com/gpu"}
    assert set(get(cluster, VOLCANO, "Queue", "research-dept")["spec"]["capability"]) == {"nvidia.com/gpu"}


def test_a_mig_flavor_given_back_leaves_the_volcano_queues(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "volcano")
    grant(team, h100, 8, 4)
    grant(team, mig, 7, 7)
    reconcile_all(cluster)
    grant(team, mig, 0, 0)
    Quota.objects.filter(team=team, flavor=mig).delete()
    sweep_converges(cluster, sandbox)
    for name in ("nlp", "research-dept"):
        spec = get(cluster, VOLCANO, "Queue", name)["spec"]
        for resources in (spec["capability"], spec["deserved"]):
            assert "nvidia.com/mig-1g.10gb" not in resources, (name, spec)


def test_leaving_a_department_removes_parent_cohort_and_borrowing(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 8, 4)
    reconcile_all(cluster)
    team.parent = None
    team.save()
    tenant_services.team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(team=team))
    sweep_converges(cluster, sandbox)
    spec = get(cluster, KUEUE, "ClusterQueue", "nlp")["spec"]
    assert spec["cohortName"] == "gpu"  # the cluster's root cohort now
    cluster.cohort = ""
    cluster.save()
    sweep_converges(cluster, sandbox)
    spec = get(cluster, KUEUE, "ClusterQueue", "nlp")["spec"]
    assert "cohortName" not in spec
    assert all("borrowingLimit" not in r for f in spec["resourceGroups"][0]["flavors"] for r in f["resources"])


def test_a_flavor_without_node_labels_and_taints_loses_them_cluster_wide(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    h100.node_taints = [{"key": "gpu", "value": "h100", "effect": "NoSchedule"}]
    h100.tolerations = [{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]
    h100.save()
    grant(team, h100, 8, 4)
    reconcile_all(cluster)
    assert set(get(cluster, KUEUE, "ResourceFlavor", "h100")["spec"]) == {"nodeLabels", "nodeTaints", "tolerations"}
    h100.node_labels, h100.node_taints, h100.tolerations = {}, [], []
    h100.save()
    sweep_converges(cluster, sandbox)
    assert not get(cluster, KUEUE, "ResourceFlavor", "h100").get("spec")


def test_a_removed_flavor_leaves_the_limit_range_and_resource_quota(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 8, 4)
    reconcile_all(cluster)
    limits = get(cluster, "v1", "LimitRange", "gpu-portal-limits", "nlp")["spec"]["limits"][0]
    assert "nvidia.com/mig-1g.10gb" in limits["max"]
    mig.delete()
    sweep_converges(cluster, sandbox)
    limits = get(cluster, "v1", "LimitRange", "gpu-portal-limits", "nlp")["spec"]["limits"][0]
    assert set(limits["max"]) == {"nvidia.com/gpu"}
    assert "nvidia.com/mig-1g.10gb" not in limits["default"]
    hard = get(cluster, "v1", "ResourceQuota", "gpu-portal-quota", "nlp")["spec"]["hard"]
    assert "requests.nvidia.com/mig-1g.10gb" not in hard


def test_a_removed_member_leaves_the_role_binding(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    keeper = MembershipFactory(team=team, role=Role.MEMBER)
    reconcile_all(cluster)
    leaver = Membership.objects.filter(team=team).exclude(pk=keeper.pk).get()
    leaver.delete()
    tenant_services.team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(team=team))
    sweep_converges(cluster, sandbox)
    subjects = get(cluster, "rbac.authorization.k8s.io/v1", "RoleBinding", "gpu-portal-edit", "nlp")["subjects"]
    assert [s["name"] for s in subjects] == [keeper.user.username]


def test_the_sweep_repairs_cluster_wide_drift(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 8, 4)
    reconcile_all(cluster)
    api = kube.client_for_cluster(cluster)
    flavor = api.get(KUEUE, "ResourceFlavor", "h100")
    api.apply({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
               "spec": {"nodeLabels": {"gpu-portal.io/flavor": "a100"}}}, field_manager="kubectl")
    api.apply({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "nlp"},
               "spec": {"stopPolicy": "HoldAndDrain"}}, field_manager="kubectl")
    api.delete(KUEUE, "Cohort", "research")
    api.delete("scheduling.k8s.io/v1", "PriorityClass", "gpu-portal-standard")
    sweep_converges(cluster, sandbox)
    assert api.get(KUEUE, "ResourceFlavor", "h100")["spec"] == flavor["spec"]
    assert api.get(KUEUE, "ClusterQueue", "nlp")["spec"]["stopPolicy"] == "None"
    assert api.get(KUEUE, "Cohort", "research")["spec"] == {"parentName": "gpu"}
    assert api.get("scheduling.k8s.io/v1", "PriorityClass", "gpu-portal-standard")["value"] == 1000


@pytest.mark.parametrize("scheduler", ["kueue", "volcano"])
def test_the_sweep_prunes_what_no_row_wants_any_more(sandbox, scheduler):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, scheduler)
    gone = TeamFactory(slug="gone")
    TeamNamespaceFactory(team=gone, cluster=cluster)
    grant(team, h100, 8, 4)
    grant(gone, h100, 2, 0)
    PriorityTierFactory(name="legacy", value=10)
    reconcile_all(cluster)
    api = kube.client_for_cluster(cluster)
    queue_kind = (KUEUE, "ClusterQueue") if scheduler == "kueue" else (VOLCANO, "Queue")
    assert api.get(*queue_kind, "gone") is not None
    # Rows removed without a nudge (a raw delete, as the admin's bulk delete does): only the sweep notices.
    Team.objects.filter(slug="gone").delete()
    PriorityTier.objects.filter(name="legacy").delete()
    GpuFlavor.objects.filter(pk=mig.pk).delete()
    sweep_converges(cluster, sandbox)
    assert api.get(*queue_kind, "gone") is None
    assert api.get("v1", "Namespace", "gone") is None
    assert api.get("scheduling.k8s.io/v1", "PriorityClass", "gpu-portal-legacy") is None
    assert api.get(*queue_kind, "nlp") is not None and api.get("v1", "Namespace", "nlp") is not None
    if scheduler == "kueue":
        assert api.get(KUEUE, "ResourceFlavor", "mig-1g") is None
        assert api.get(KUEUE, "WorkloadPriorityClass", "gpu-portal-legacy") is None
        assert api.get(KUEUE, "ResourceFlavor", "h100") is not None
