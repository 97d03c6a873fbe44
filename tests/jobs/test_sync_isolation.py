"""One dead cluster stops nothing: the periodic tasks go on with the other clusters and report the dead one, and
the gateway's errors survive Celery's serialisation."""

import pickle

import pytest
from celery.utils.serialization import get_pickleable_exception

from composition import reconcile
from jobs import services
from jobs import sync as job_sync
from jobs.choices import JobState
from jobs.models import Job
from portal import kube
from portal.reconciled import SyncState
from quotas.models import Quota
from sandbox import Sandbox
from tenants.models import Cluster, TeamNamespace
from tests.factories import ClusterFactory, GpuFlavorFactory, PriorityTierFactory, TeamFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_kube_errors_survive_pickling():
    error = kube.KubeError(503, "ServiceUnavailable", "etcd leader changed")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status, copy.reason, copy.message, str(copy)) == (503, "ServiceUnavailable",
                                                                   "etcd leader changed", str(error))
    assert copy.transient
    assert get_pickleable_exception(error) is error  # Celery sends it as it is, not as UnpickleableExceptionWrapper


@pytest.fixture
def three_clusters():
    """The first cluster (lowest id, synced first) is dead; the other two are sandboxes, one per scheduler."""
    with Sandbox() as kueue, Sandbox() as volcano:
        dead = ClusterFactory(name="dead", server="http://127.0.0.1:9")
        alive = [ClusterFactory(name="kueue", server=kueue.url, scheduler="kueue"),
                 ClusterFactory(name="volcano", server=volcano.url, scheduler="volcano", cohort="")]
        yield dead, alive
    kube.forget_clients()


def running_job(cluster, team, user, tier) -> Job:
    flavor = GpuFlavorFactory(cluster=cluster, name=f"h100-{cluster.name}")
    TeamNamespace.objects.get_or_create(team=team, cluster=cluster)
    # The team holds quota there, so its queue exists: Volcano refuses a job whose queue does not.
    Quota.objects.create(team=team, flavor=flavor, guaranteed=8, burst=0, cpu_cores=64, memory_gib=256)
    job = Job.objects.create(team=team, cluster=cluster, flavor=flavor, priority_tier=tier, kind="batch",
                             name="train", image="ghcr.io/acme/train:1", command=["python"], submitted_by=user,
                             state=JobState.QUEUED)
    return job


def test_one_dead_cluster_of_three_the_others_are_synced_and_it_is_reported(three_clusters):
    dead, alive = three_clusters
    team, user, tier = TeamFactory(slug="nlp"), UserFactory(), PriorityTierFactory(name="standard")
    for cluster in [dead, *alive]:
        reconcile.cluster_reconcile(cluster_id=cluster.pk)
    jobs = {c.name: running_job(c, team, user, tier) for c in [dead, *alive]}
    for cluster in alive:
        reconcile.team_namespace_reconcile(
            team_namespace_id=TeamNamespace.objects.get(team=team, cluster=cluster).pk)
        services.job_reconcile(job_id=jobs[cluster.name].pk)
        api = kube.client_for_cluster(cluster)
        job = jobs[cluster.name]
        if cluster.scheduler == "kueue":
            path = kube.path_for("batch/v1", "Job", "nlp", job.object_name) + "/status"
            body = {"status": {"startTime": "2026-11-22T10:00:00Z", "completionTime": "2026-11-22T11:00:00Z",
                               "conditions": [{"type": "Complete", "status": "True"}]}}
        else:
            path = kube.path_for("batch.volcano.sh/v1alpha1", "Job", "nlp", job.object_name) + "/status"
            body = {"status": {"state": {"phase": "Completed", "lastTransitionTime": "2026-11-22T11:00:00Z"}}}
        api._call("PATCH", path, body=body, content_type="application/merge-patch+json")

    report = job_sync.job_status_sync_all()

    assert set(report["synced"]) == {"kueue", "volcano"}
    assert list(report["failed"]) == ["dead"] and "Unreachable" in report["failed"]["dead"]
    states = {job.cluster.name: job.state for job in Job.objects.select_related("cluster")}
    assert states == {"dead": JobState.QUEUED, "kueue": JobState.SUCCEEDED, "volcano": JobState.SUCCEEDED}
    conditions = {c.name: next(x for x in c.conditions if x["type"] == "JobsSynced") for c in Cluster.objects.all()}
    assert conditions["dead"]["status"] == "False" and "Unreachable" in conditions["dead"]["message"]
    assert conditions["kueue"]["status"] == conditions["volcano"]["status"] == "True"


def test_the_reconcile_sweep_and_due_retries_go_past_a_cluster_that_cannot_even_be_configured(sandbox):
    broken = ClusterFactory(name="broken", connection="kubeconfig", context="no-such-context")
    good = ClusterFactory(name="good", server=sandbox.url)
    team = TeamFactory(slug="nlp")
    for cluster in (broken, good):
        TeamNamespace.objects.create(team=team, cluster=cluster)
    totals = reconcile.reconcile_sweep()
    assert totals["clusters"] == 2 and totals["errors"] >= 1
    assert kube.client_for_cluster(good).get("v1", "Namespace", "nlp") is not None
    broken.refresh_from_db()
    assert broken.sync_state == SyncState.REJECTED and "BadConnection" in broken.sync_message
    # The broken cluster's row comes first and fails; the good cluster's row after it is still reconciled.
    TeamNamespace.objects.update(next_attempt_at="2000-01-01T00:00:00Z", generation=5)
    TeamNamespace.objects.filter(cluster=good).update(next_attempt_at="2000-01-01T00:00:01Z")
    assert reconcile.reconcile_due() == 2
    assert TeamNamespace.objects.get(cluster=good).observed_generation == 5
