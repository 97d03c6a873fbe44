"""A Volcano cluster's parent queue (its `cohort`): created and sized by the portal above every team and department
queue, grown before them and shrunk after them, so one sweep converges either way."""

import pytest

from composition import reconcile
from portal.reconciled import SyncState
from quotas import services
from tenants.models import Cluster, TeamNamespace
from tests.factories import PlatformAdminFactory, TeamFactory, TeamNamespaceFactory
from tests.quotas.test_reconcile import VOLCANO, get, grant, reconcile_all, setup_cluster

pytestmark = pytest.mark.django_db


def gpu_parent_cluster(url):
    """nlp under the research department, cv directly under the cluster's parent queue `gpu`."""
    cluster, team, row, h100, mig = setup_cluster(url, "volcano")
    Cluster.objects.filter(pk=cluster.pk).update(cohort="gpu")
    cluster.refresh_from_db()
    cv = TeamFactory(slug="cv")
    TeamNamespaceFactory(team=cv, cluster=cluster)
    return cluster, team, cv, h100


def resources(cluster, name):
    spec = get(cluster, VOLCANO, "Queue", name)["spec"]
    return spec.get("parent"), spec["deserved"].get("nvidia.com/gpu"), spec["capability"].get(
        "nvidia.com/gpu")


def converges_in_one_sweep(cluster, sandbox):
    first = reconcile.reconcile_sweep()
    assert first["errors"] == 0, first
    assert first["writes"] > 0
    sandbox.reset_stats()
    assert reconcile.reconcile_sweep()["writes"] == 0
    assert sandbox.stats()["writes"] == 0
    for row in TeamNamespace.objects.filter(cluster=cluster):
        assert row.sync_state == SyncState.APPLIED, (row.team.slug, row.sync_message)
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.APPLIED, cluster.sync_message


def test_the_cluster_parent_queue_is_created_above_departments_and_teams(any_sandbox):
    cluster, nlp, cv, h100 = gpu_parent_cluster(any_sandbox.url)
    grant(nlp, h100, 8, 4)
    grant(cv, h100, 4, 2)
    reconcile_all(cluster)
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.APPLIED, cluster.sync_message
    for row in TeamNamespace.objects.filter(cluster=cluster):
        assert row.sync_state == SyncState.APPLIED, (row.team.slug, row.sync_message)
    assert resources(cluster, "gpu") == (None, "12", "18")
    assert resources(cluster, "research-dept") == ("gpu", "8", "12")
    assert resources(cluster, "nlp") == ("research-dept", "8", "12")
    assert resources(cluster, "cv") == ("gpu", "4", "6")


def test_growth_and_give_back_through_three_levels_converge_in_one_sweep(any_sandbox):
    cluster, nlp, cv, h100 = gpu_parent_cluster(any_sandbox.url)
    grant(nlp, h100, 8, 4)
    grant(cv, h100, 4, 2)
    reconcile_all(cluster)
    admin = PlatformAdminFactory()
    services.quota_set(actor=admin, team=nlp, flavor=h100, guaranteed=16, burst=8, cpu_cores=128,
                        memory_gib=1024)
    converges_in_one_sweep(cluster, any_sandbox)
    assert resources(cluster, "gpu") == (None, "20", "30")
    assert resources(cluster, "research-dept") == ("gpu", "16", "24")
    services.quota_set(actor=admin, team=nlp, flavor=h100, guaranteed=2, burst=0, cpu_cores=16,
                        memory_gib=128)
    converges_in_one_sweep(cluster, any_sandbox)
    assert resources(cluster, "gpu") == (None, "6", "8")
    assert resources(cluster, "research-dept") == ("gpu", "2", "2")
    assert resources(cluster, "nlp") == ("research-dept", "2", "2")


def test_a_parent_queue_no_longer_named_is_pruned_after_its_children_move(any_sandbox):
    cluster, nlp, cv, h100 = gpu_parent_cluster(any_sandbox.url)
    grant(cv, h100, 4, 2)
    reconcile_all(cluster)
    Cluster.objects.filter(pk=cluster.pk).update(cohort="root", generation=cluster.generation + 1)
    for _ in range(3):
        if reconcile.reconcile_sweep()["writes"] == 0:
            break
    assert get(cluster, VOLCANO, "Queue", "gpu") is None
    assert resources(cluster, "cv") == (None, "4", "6")


def test_a_queue_growing_in_one_resource_and_shrinking_in_another_converges_in_one_sweep(any_sandbox):
    """Neither order alone works here: grown first, the parent's cpu would fall below the team's; shrunk last, its
    GPUs would stay below the team's new capability. Parents are widened first, then set exactly after."""
    cluster, nlp, cv, h100 = gpu_parent_cluster(any_sandbox.url)
    grant(nlp, h100, 8, 4)
    reconcile_all(cluster)
    services.quota_set(actor=PlatformAdminFactory(), team=nlp, flavor=h100, guaranteed=16, burst=8, cpu_cores=8,
                       memory_gib=64)
    converges_in_one_sweep(cluster, any_sandbox)
    assert resources(cluster, "gpu") == (None, "16", "24")
    assert get(cluster, VOLCANO, "Queue", "gpu")["spec"]["capability"]["cpu"] == "8"
    assert get(cluster, VOLCANO, "Queue", "research-dept")["spec"]["capability"]["cpu"] == "8"


def approve(team, flavor, guaranteed, burst, capture):
    member = team.memberships.first().user
    request = services.quota_request_create(actor=member, team=team, flavor=flavor, guaranteed=guaranteed,
                                            burst=burst, cpu_cores=8 * guaranteed, memory_gib=64 * guaranteed,
                                            justification="A bigger run this month")
    with capture(execute=True):
        services.quota_request_approve(actor=PlatformAdminFactory(), request=request)


def test_an_approval_grows_the_department_and_cluster_queues_before_the_teams_queue(
        any_sandbox, django_capture_on_commit_callbacks):
    """Without the periodic sweep: the approval's own reconcile widens the parents first, then the team's queue is
    applied, then the parents take their exact size."""
    cluster, nlp, cv, h100 = gpu_parent_cluster(any_sandbox.url)
    grant(nlp, h100, 8, 4)
    grant(cv, h100, 4, 2)
    reconcile_all(cluster)
    approve(nlp, h100, 16, 8, django_capture_on_commit_callbacks)
    row = TeamNamespace.objects.get(cluster=cluster, team=nlp)
    assert row.sync_state == SyncState.APPLIED, row.sync_message
    assert resources(cluster, "nlp") == ("research-dept", "16", "24")
    assert resources(cluster, "research-dept") == ("gpu", "16", "24")
    assert resources(cluster, "gpu") == (None, "20", "30")
    # Giving back: the team's queue shrinks first, then its parents follow, again without a sweep.
    with django_capture_on_commit_callbacks(execute=True):
        services.quota_set(actor=PlatformAdminFactory(), team=nlp, flavor=h100, guaranteed=2, burst=0,
                           cpu_cores=16, memory_gib=128)
    assert resources(cluster, "nlp") == ("research-dept", "2", "2")
    assert resources(cluster, "research-dept") == ("gpu", "2", "2")
    assert resources(cluster, "gpu") == (None, "6", "8")
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.APPLIED, cluster.sync_message


def test_a_queue_refused_for_its_parents_size_is_retried_with_backoff():
    """Volcano judges a queue against its parent and children as they are now: such a refusal lifts once the other
    queue converges, so it is retried with backoff, not recorded as permanent (left for the sweep)."""
    from portal.kube import KubeError

    waits = KubeError(400, "", 'admission webhook "validatequeue.volcano.sh" denied the request: parent queue '
                               "research-dept validation failed: sum of children's guarantee (nvidia.com/gpu 16.00) "
                               "exceeds parent's guarantee limit (nvidia.com/gpu 8.00)")
    smaller = KubeError(400, "", 'admission webhook "validatequeue.volcano.sh" denied the request: queue gpu '
                                 "capability[nvidia.com/gpu]=8.00 is smaller than its descendants' max "
                                 "capability=24.00")
    malformed = KubeError(400, "", 'admission webhook "validatequeue.volcano.sh" denied the request: '
                                   "requestBody.spec.state: Invalid value: \"Sleeping\": queue state must be in "
                                   "[Open Closed]")
    assert waits.transient and smaller.transient
    assert not malformed.transient


def test_queues_that_guaranteed_their_quota_lose_the_guarantee_in_one_sweep(any_sandbox):
    """Queues the portal wrote when it still guaranteed each team's GPUs (a parent's guarantee at least its
    children's sum, as Volcano's webhook requires): the sweep removes every guarantee and leaves the deserved shares.
    A parent may lose its guarantee first: without one, the webhook bounds its children's by its capability
    (pkg/webhooks/admission/queues/validate validateResourceLimit)."""
    from portal import kube

    cluster, nlp, cv, h100 = gpu_parent_cluster(any_sandbox.url)
    grant(nlp, h100, 8, 4)
    grant(cv, h100, 4, 2)
    reconcile_all(cluster)
    client = kube.client_for_cluster(cluster)
    for name, gpus in (("gpu", "12"), ("research-dept", "8"), ("nlp", "8"), ("cv", "4")):  # parents first
        live = get(cluster, VOLCANO, "Queue", name)
        client.apply({"apiVersion": live["apiVersion"], "kind": "Queue",
                      "metadata": {"name": name, "labels": live["metadata"]["labels"]},
                      "spec": {**live["spec"], "guarantee": {"resource": {"nvidia.com/gpu": gpus}}}})
    assert get(cluster, VOLCANO, "Queue", "nlp")["spec"]["guarantee"]["resource"] == {"nvidia.com/gpu": "8"}
    converges_in_one_sweep(cluster, any_sandbox)
    for name in ("gpu", "research-dept", "nlp", "cv"):
        assert "guarantee" not in get(cluster, VOLCANO, "Queue", name)["spec"], name
    assert resources(cluster, "gpu") == (None, "12", "18")
    assert resources(cluster, "nlp") == ("research-dept", "8", "12")
