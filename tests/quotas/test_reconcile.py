"""What approvals become in the cluster, on Kueue and on Volcano, through the real reconcile path."""

from datetime import timedelta

import pytest
from django.utils import timezone

from composition import reconcile
from portal import kube
from portal.reconciled import SyncState
from quotas import services
from quotas.models import Quota
from tenants.choices import Role, TeamState
from tenants.models import TeamNamespace
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
)
from tests.kueue_queues import flavor_quota

pytestmark = pytest.mark.django_db
KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"


def setup_cluster(url, scheduler):
    cluster = ClusterFactory(server=url, scheduler=scheduler, cohort="gpu" if scheduler == "kueue" else "root")
    h100 = GpuFlavorFactory(cluster=cluster, name="h100", capacity=32)
    mig = GpuFlavorFactory(cluster=cluster, name="mig-1g", resource_name="nvidia.com/mig-1g.10gb", sharing="mig",
                           capacity=56, gpus_per_node=56, gpu_fraction="0.1429")
    PriorityTierFactory(name="standard", value=1000)
    department = TeamFactory(slug="research")
    team = TeamFactory(slug="nlp", parent=department)
    MembershipFactory(team=team, role=Role.MEMBER)
    row = TeamNamespaceFactory(team=team, cluster=cluster)
    TeamNamespaceFactory(team=department, cluster=cluster)
    return cluster, team, row, h100, mig


def grant(team, flavor, guaranteed, burst, **extra):
    return services.quota_set(actor=PlatformAdminFactory(), team=team, flavor=flavor, guaranteed=guaranteed,
                              burst=burst, cpu_cores=8 * guaranteed, memory_gib=64 * guaranteed, **extra)


def reconcile_all(cluster):
    reconcile.cluster_reconcile(cluster_id=cluster.pk)
    for row in TeamNamespace.objects.filter(cluster=cluster):
        reconcile.team_namespace_reconcile(team_namespace_id=row.pk)


def get(cluster, api_version, kind, name, namespace=None):
    return kube.client_for_cluster(cluster).get(api_version, kind, name, namespace)


def test_kueue_team_objects_follow_the_quota(any_sandbox):
    cluster, team, row, h100, mig = setup_cluster(any_sandbox.url, "kueue")
    grant(team, h100, 8, 4)
    grant(team, mig, 7, 0)
    reconcile_all(cluster)
    row.refresh_from_db()
    assert row.sync_state == SyncState.APPLIED, row.sync_message
    queue = get(cluster, KUEUE, "ClusterQueue", "nlp")
    assert queue["spec"]["cohortName"] == "research"
    assert flavor_quota(queue, "h100", "nvidia.com/gpu") == {"name": "nvidia.com/gpu", "nominalQuota": "8",
                                                             "borrowingLimit": "4"}
    assert flavor_quota(queue, "h100", "nvidia.com/mig-1g.10gb") == {
        "name": "nvidia.com/mig-1g.10gb", "nominalQuota": "0", "borrowingLimit": "0"}
    assert get(cluster, KUEUE, "LocalQueue", "default", "nlp")["spec"]["clusterQueue"] == "nlp"
    hard = get(cluster, "v1", "ResourceQuota", "gpu-portal-quota", "nlp")["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "12" and hard["requests.nvidia.com/mig-1g.10gb"] == "7"
    assert get(cluster, "v1", "LimitRange", "gpu-portal-limits", "nlp") is not None
    assert get(cluster, KUEUE, "ResourceFlavor", "h100") is not None
    assert get(cluster, KUEUE, "WorkloadPriorityClass", "gpu-portal-standard")["value"] == 1000
    assert get(cluster, KUEUE, "Cohort", "research")["spec"] == {"parentName": "gpu"}
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.APPLIED, cluster.sync_message


def test_reconciling_quota_objects_twice_writes_nothing(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 8, 4)
    reconcile_all(cluster)
    sandbox.reset_stats()
    reconcile_all(cluster)
    assert sandbox.stats()["writes"] == 0


def test_removing_a_flavor_then_all_quota_prunes_the_queues(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 8, 4)
    grant(team, mig, 7, 0)
    reconcile_all(cluster)
    grant(team, mig, 0, 0)
    reconcile_all(cluster)
    queue = get(cluster, KUEUE, "ClusterQueue", "nlp")
    assert [g["coveredResources"] for g in queue["spec"]["resourceGroups"]] == [["cpu", "memory", "nvidia.com/gpu"]]
    hard = get(cluster, "v1", "ResourceQuota", "gpu-portal-quota", "nlp")["spec"]["hard"]
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "0"
    grant(team, h100, 0, 0)
    reconcile_all(cluster)
    assert get(cluster, KUEUE, "ClusterQueue", "nlp") is None
    assert get(cluster, KUEUE, "LocalQueue", "default", "nlp") is None


def test_a_suspended_team_is_held_on_kueue(sandbox):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 8, 4)
    reconcile_all(cluster)
    team.state = TeamState.SUSPENDED
    team.save()
    reconcile_all(cluster)
    assert get(cluster, KUEUE, "ClusterQueue", "nlp")["spec"]["stopPolicy"] == "Hold"
    assert get(cluster, KUEUE, "LocalQueue", "default", "nlp")["spec"]["stopPolicy"] == "Hold"


def test_volcano_queues_with_a_department_parent(any_sandbox):
    cluster, team, row, h100, mig = setup_cluster(any_sandbox.url, "volcano")
    grant(team, h100, 8, 4)
    grant(team, mig, 7, 7)
    reconcile_all(cluster)
    row.refresh_from_db()
    assert row.sync_state == SyncState.APPLIED, row.sync_message
    queue = get(cluster, VOLCANO, "Queue", "nlp")
    assert queue["spec"]["parent"] == "research-dept"
    assert queue["spec"]["capability"]["nvidia.com/gpu"] == "12"
    assert queue["spec"]["deserved"]["nvidia.com/mig-1g.10gb"] == "7"
    assert "guarantee" not in queue["spec"]
    department = get(cluster, VOLCANO, "Queue", "research-dept")
    assert department["spec"]["capability"] == {"nvidia.com/gpu": "12", "nvidia.com/mig-1g.10gb": "14",
                                                "cpu": "120", "memory": "960Gi"}
    assert get(cluster, KUEUE, "ClusterQueue", "nlp") is None
    team.state = TeamState.SUSPENDED
    team.save()
    reconcile_all(cluster)
    assert get(cluster, VOLCANO, "Queue", "nlp")["spec"]["capability"] == {"nvidia.com/gpu": "0",
                                                                           "nvidia.com/mig-1g.10gb": "0"}


def test_an_expired_grant_reverts_and_the_cluster_follows(sandbox, django_capture_on_commit_callbacks):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    grant(team, h100, 2, 0)
    member = team.memberships.first().user
    request = services.quota_request_create(actor=member, team=team, flavor=h100, guaranteed=16, burst=0,
                                            cpu_cores=128, memory_gib=1024, justification="Big run for two weeks",
                                            ends_at=timezone.now() + timedelta(days=14))
    with django_capture_on_commit_callbacks(execute=True):
        services.quota_request_approve(actor=PlatformAdminFactory(), request=request)
    queue = get(cluster, KUEUE, "ClusterQueue", "nlp")
    assert flavor_quota(queue, "h100", "nvidia.com/gpu")["nominalQuota"] == "16"
    Quota.objects.filter(team=team, flavor=h100).update(expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert services.quota_expire_due() == 1
    queue = get(cluster, KUEUE, "ClusterQueue", "nlp")
    assert flavor_quota(queue, "h100", "nvidia.com/gpu")["nominalQuota"] == "2"
