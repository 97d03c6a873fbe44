import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from jobs import selectors, services
from jobs import sync as job_sync
from jobs.choices import JobState
from jobs.models import Job
from portal import kube
from quotas.models import Quota
from tenants.choices import Role
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(request):
    url = request.getfixturevalue("sandbox").url if "sandbox" in request.fixturenames else "http://127.0.0.1:9"
    scheduler = getattr(request, "param", "kueue")
    # As build_world: a Volcano cluster's team queues hang under root (Volcano refuses a parent queue that does not
    # exist, and the portal creates none for the cluster).
    cluster = ClusterFactory(server=url, scheduler=scheduler, cohort="gpu" if scheduler == "kueue" else "")
    flavor = GpuFlavorFactory(cluster=cluster, name="h100", gpus_per_node=8, capacity=64)
    team = TeamFactory(slug="nlp")
    TeamNamespaceFactory(team=team, cluster=cluster)
    Quota.objects.create(team=team, flavor=flavor, guaranteed=8, burst=8, cpu_cores=128, memory_gib=1024)
    tier = PriorityTierFactory(name="standard", value=1000, is_default=True)
    member = MembershipFactory(team=team, role=Role.MEMBER, user__email="erin@example.com").user
    return {"cluster": cluster, "flavor": flavor, "team": team, "tier": tier, "member": member}


def submit(world, **overrides):
    fields = dict(actor=world["member"], team=world["team"], flavor=world["flavor"], kind="pytorch", name="train",
                  image="ghcr.io/acme/train:1.2", command=["torchrun", "train.py"], workers=2, gpus_per_worker=4)
    fields.update(overrides)
    return services.job_submit(**fields)


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"image": "ghcr.io/acme/train:1.2; rm -rf /"}, "image", "image reference"),
        ({"image": "bad image"}, "image", "image reference"),
        ({"env": {"1BAD": "x"}}, "env", "not a valid environment variable name"),
        ({"env": {"OK": 3}}, "env", "must be a string"),
        ({"env": {"OK\n": "3"}}, "env", "not a valid environment variable name"),
        ({"image": "ghcr.io/acme/train:1.2\n"}, "image", "image reference"),
        ({"command": "torchrun train.py"}, "command", "list of strings"),
        ({"workers": 10_000}, "workers", "less than or equal to 256"),
        ({"gpus_per_worker": 0}, "gpus_per_worker", "at least one GPU"),
        ({"gpus_per_worker": 16, "workers": 1}, "gpus_per_worker", "node has 8 GPUs"),
        ({"workers": 3, "gpus_per_worker": 8}, "workers", "more than the team's h100 limit of 16"),
        ({"name": "Bad_Name"}, "name", "DNS-1123"),
        # The team holds 128 CPUs and 1024 GiB with h100 (Kueue gives each flavor its own): a Ray job's head and
        # KubeRay's submitter count too.
        ({"kind": "ray", "command": ["python", "tune.py"], "workers": 15, "gpus_per_worker": 1,
          "cpu_per_worker": 8}, "cpu_per_worker",
         "Its pods ask for 128.5 CPUs in all (a Ray head, 15 workers and KubeRay's submitter of 0.5 CPU and 200Mi), "
         "more than the team's CPU quota of 128 CPUs with flavor h100: it could never start."),
        ({"memory_gib_per_worker": 600}, "memory_gib_per_worker",
         "Its pods ask for 1200 GiB in all (2 workers), more than the team's memory quota of 1024 GiB with flavor "
         "h100"),
    ],
)
def test_infeasible_jobs_are_refused_before_anything_is_applied(world, overrides, field, message):
    with pytest.raises(ValidationError) as info:
        submit(world, **overrides)
    assert field in info.value.message_dict and message in " ".join(info.value.message_dict[field])
    assert not Job.objects.exists()


def test_a_flavor_outside_the_quota_is_refused(world):
    other = GpuFlavorFactory(cluster=world["cluster"], name="l40s")
    with pytest.raises(ValidationError, match="holds no l40s quota"):
        submit(world, flavor=other)


def test_viewers_cannot_submit(world):
    viewer = MembershipFactory(team=world["team"], role=Role.VIEWER).user
    with pytest.raises(PermissionDenied):
        submit(world, actor=viewer)


def objects(cluster, namespace="nlp"):
    client = kube.client_for_cluster(cluster)
    found = []
    for api_version, kind in selectors.job_kinds(cluster.scheduler):
        found += [f"{o['kind']}/{o['metadata']['name']}" for o in client.list(api_version, kind, namespace=namespace)]
    return sorted(found)


def reconcile_team(world):
    from composition import reconcile
    from tenants.models import TeamNamespace

    for row in TeamNamespace.objects.all():
        reconcile.team_namespace_reconcile(team_namespace_id=row.pk)


@pytest.mark.parametrize("world", ["kueue", "volcano"], indirect=True)
def test_submit_creates_objects_once_and_cancel_deletes_them(sandbox, world, run_on_commit):
    reconcile_team(world)
    with run_on_commit():
        job = submit(world)
    job.refresh_from_db()
    assert job.state == JobState.QUEUED, job.sync_message
    expected = ([f"Job/{job.object_name}", f"Service/{job.object_name}"] if world["cluster"].scheduler == "kueue"
                else [f"Job/{job.object_name}"])
    assert objects(world["cluster"]) == expected
    sandbox.reset_stats()
    services.job_reconcile(job_id=job.pk)
    assert sandbox.stats()["writes"] == 0
    with run_on_commit():
        services.job_cancel(actor=world["member"], job=job)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and objects(world["cluster"]) == []
    with run_on_commit():
        again = services.job_resubmit(actor=world["member"], job=job)
    assert again.resubmit_of == job and again.object_name != job.object_name


def test_status_sync_follows_the_job_with_one_list_per_kind_per_namespace(sandbox, world, run_on_commit):
    reconcile_team(world)
    with run_on_commit():
        jobs = [submit(world, name=f"train{i}", workers=1, gpus_per_worker=1) for i in range(3)]
    api = kube.client_for_cluster(world["cluster"])
    running, done = jobs[0], jobs[1]
    path = kube.path_for("batch/v1", "Job", "nlp", running.object_name) + "/status"
    api._call("PATCH", path, body={"status": {"active": 1, "startTime": "2026-11-22T10:00:00Z"}},
              content_type="application/merge-patch+json")
    path = kube.path_for("batch/v1", "Job", "nlp", done.object_name) + "/status"
    api._call("PATCH", path, body={"status": {"startTime": "2026-11-22T10:00:00Z", "completionTime":
              "2026-11-22T11:00:00Z", "conditions": [{"type": "Complete", "status": "True"}]}},
              content_type="application/merge-patch+json")
    api.delete("batch/v1", "Job", jobs[2].object_name, "nlp")
    sandbox.reset_stats()
    counts = job_sync.job_status_sync(cluster=world["cluster"])
    # Service, Job, RayJob, Workload in the one namespace, and its pods: two jobs are seen started for the first time
    assert counts["lists"] == 5
    assert sandbox.stats()["requests"] == 5
    states = {j.pk: j.state for j in Job.objects.all()}
    assert states == {running.pk: JobState.RUNNING, done.pk: JobState.SUCCEEDED, jobs[2].pk: JobState.FAILED}
    finished = Job.objects.get(pk=done.pk)
    # No Workload says when it was admitted: then it is when it started (never after), by the cluster's clock.
    assert finished.run_seconds == 3600 and finished.admitted_at == finished.started_at
    sandbox.reset_stats()
    assert job_sync.job_status_sync(cluster=world["cluster"])["lists"] == 4  # starts known: no pods read
    assert "disappeared" in Job.objects.get(pk=jobs[2].pk).state_message


def test_why_waiting_says_what_the_team_holds(world):
    job = Job.objects.create(team=world["team"], cluster=world["cluster"], flavor=world["flavor"],
                             priority_tier=world["tier"], kind="pytorch", name="big", image="x/y:1", workers=2,
                             gpus_per_worker=8, submitted_by=world["member"], state=JobState.QUEUED,
                             state_message="insufficient unused quota for nvidia.com/gpu in flavor h100")
    sentence = selectors.why_waiting(job=job)
    assert sentence.startswith("Waiting for 16 nvidia.com/gpu of flavor h100: team quota 8 guaranteed + 8 burst")
    assert "insufficient unused quota" in sentence


def test_why_waiting_says_the_resource_quota_refuses_a_dra_jobs_claims(world):
    """A scheduler whose queue does not count DRA claims (Volcano's proportion plugin) lets the job in; the team's
    ResourceQuota refuses its workers' claims, and the scheduler's DRA plugin says only that the claim is not
    created: quota, not placement."""
    words = ("1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 "
             "Unschedulable. Origin reason is big-main-0: 0/2 nodes are unavailable: 2 plugin DynamicResources "
             'pre-predicates failed pod "nlp/big-main-0": ResourceClaim not created yet.')
    job = Job.objects.create(team=world["team"], cluster=world["cluster"], flavor=world["flavor"],
                             priority_tier=world["tier"], kind="batch", name="big", image="x/y:1", workers=1,
                             gpus_per_worker=4, submitted_by=world["member"], state=JobState.QUEUED,
                             state_message=words)
    assert selectors.why_waiting(job=job) == (
        "Waiting for 4 nvidia.com/gpu of flavor h100: team quota 8 guaranteed + 8 burst, 0 in use by 0 jobs; the "
        "team's ResourceQuota refuses its workers' device claims until devices are free (the scheduler's queue does "
        f"not count them). Scheduler: {words}")


@pytest.mark.parametrize(("world", "flavor", "where", "held", "in_use", "count"), [
    ("kueue", "h100", "with flavor h100", 128, 120, "1 job"),  # each flavor of the ClusterQueue has its own
    ("volcano", "nvidia.com/gpu", "in this cluster", 160, 152, "2 jobs"),  # the queue's capability pools them
], indirect=["world"])
def test_why_waiting_says_when_cpu_not_gpus_is_short(world, flavor, where, held, in_use, count,
                                                      django_assert_max_num_queries):
    """Kueue counts a Ray job's submitter as a pod set of its own, so a job can wait for CPU with GPUs to spare;
    the CPU it waits for is its flavor's under Kueue, the team's in the cluster under Volcano."""
    l40s = GpuFlavorFactory(cluster=world["cluster"], name="l40s", gpus_per_node=4, capacity=16)
    Quota.objects.create(team=world["team"], flavor=l40s, guaranteed=4, burst=0, cpu_cores=32, memory_gib=256)

    def job(name, **fields):
        fields = {"flavor": world["flavor"], **fields}
        return Job.objects.create(team=world["team"], cluster=world["cluster"], priority_tier=world["tier"],
                                  name=name, image="x/y:1", submitted_by=world["member"], **fields)

    job("busy", kind="pytorch", workers=15, gpus_per_worker=1, cpu_per_worker=8, state=JobState.RUNNING)
    job("small", kind="batch", workers=1, gpus_per_worker=1, cpu_per_worker=32, flavor=l40s, state=JobState.RUNNING)
    words = (f"couldn't assign flavors to pod set submitter: insufficient unused quota for cpu in flavor {flavor}, "
             "500m more needed") if world["cluster"].scheduler == "kueue" else \
        "queue resource quota insufficient: insufficient cpu"
    tune = job("tune", kind="ray", workers=1, gpus_per_worker=1, cpu_per_worker=4, memory_gib_per_worker=32,
               state=JobState.QUEUED, state_message=words)
    with django_assert_max_num_queries(6):  # the job, then a fixed number whatever the team runs
        sentence = selectors.why_waiting(job=Job.objects.select_related("team", "cluster", "flavor").get(pk=tune.pk))
    assert sentence == (
        "Waiting for CPU, not GPUs: its pods ask for 8.5 CPUs in all (a Ray head, 1 worker and KubeRay's submitter of "
        f"0.5 CPU and 200Mi); the team's CPU quota {where} is {held} CPUs, {in_use} in use by {count}. "
        f"Scheduler: {words}")


def test_templates_are_saved_replaced_and_deleted_with_an_audit_trail(world):
    from jobs.models import JobTemplate
    from tenants.models import AuditEvent

    member, team = world["member"], world["team"]
    first = services.job_template_save(actor=member, team=team, kind="pytorch", name="nightly", values={"workers": 2})
    again = services.job_template_save(actor=member, team=team, kind="pytorch", name="nightly", values={"workers": 4})
    assert again.pk == first.pk and JobTemplate.objects.get().values == {"workers": 4}
    viewer = MembershipFactory(team=team, role=Role.VIEWER).user
    with pytest.raises(PermissionDenied):
        services.job_template_delete(actor=viewer, template=again)
    with pytest.raises(PermissionDenied):
        services.job_template_save(actor=viewer, team=team, kind="batch", name="other", values={})
    services.job_template_delete(actor=member, template=again)
    assert not JobTemplate.objects.exists()
    actions = list(AuditEvent.objects.filter(object_type="jobtemplate").values_list("action", flat=True))
    assert sorted(actions) == ["job_template.delete", "job_template.save", "job_template.save"]
