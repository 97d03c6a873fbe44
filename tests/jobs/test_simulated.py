"""Jobs against a sandbox that runs them: every state the status sync maps (queued with why-waiting, admitted,
running, succeeded, failed, preempted), and cancel and resubmit end to end, on Kueue and on Volcano."""

from datetime import UTC, datetime

import pytest

from jobs import selectors, services
from jobs import sync as job_sync
from jobs.choices import JobState
from jobs.models import Job
from portal import kube
from tests.jobs.conftest import T0, build_world, step

pytestmark = pytest.mark.django_db
BACKENDS = ["kueue", "volcano"]


def submit(world, run_on_commit, **overrides):
    fields = dict(actor=world["member"], team=world["team"], flavor=world["flavor"], kind="pytorch", name="train",
                  image="ghcr.io/acme/train:1.2", command=["torchrun", "train.py"], workers=2, gpus_per_worker=4,
                  cpu_per_worker=4, memory_gib_per_worker=32)
    fields.update(overrides)
    with run_on_commit():
        return services.job_submit(**fields)


def sync(world) -> dict[int, Job]:
    job_sync.job_status_sync(cluster=world["cluster"])
    return {job.pk: job for job in Job.objects.all()}


def pods(world, job):
    client = kube.client_for_cluster(world["cluster"])
    return client.list("v1", "Pod", namespace="nlp", label_selector=f"gpu-portal.io/job={job.pk}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["pytorch", "ray", "batch"])
def test_a_job_goes_queued_admitted_running_succeeded(any_simulating_sandbox, run_on_commit, backend, kind):
    world = build_world(any_simulating_sandbox.url, backend)
    job = submit(world, run_on_commit, kind=kind, name=f"{kind}-run")
    seen = [Job.objects.get(pk=job.pk).state]
    for clock in (0, 5, 105):
        step(any_simulating_sandbox, clock)
        seen.append(sync(world)[job.pk].state)
    assert seen == [JobState.QUEUED, JobState.ADMITTED, JobState.RUNNING, JobState.SUCCEEDED]
    done = Job.objects.get(pk=job.pk)
    assert done.admitted_at and done.started_at and done.finished_at and done.finished_at >= done.started_at
    phases = {p["status"]["phase"] for p in pods(world, job)}
    assert phases == {"Succeeded"}


@pytest.mark.parametrize(
    ("backend", "words"),
    [("kueue", "insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed"),
     # proportion's enqueue refusal, which Volcano records as an Event on the PodGroup
     ("volcano", "queue resource quota insufficient: insufficient nvidia.com/gpu")],
)
def test_a_queued_job_says_why_in_the_schedulers_words(simulating_sandbox, run_on_commit, backend, words):
    world = build_world(simulating_sandbox.url, backend, guaranteed=8, burst=0)
    first = submit(world, run_on_commit, name="first", workers=1, gpus_per_worker=8)
    second = submit(world, run_on_commit, name="second", workers=1, gpus_per_worker=8)
    step(simulating_sandbox, 0)
    rows = sync(world)
    assert (rows[first.pk].state, rows[second.pk].state) == (JobState.ADMITTED, JobState.QUEUED)
    assert words in rows[second.pk].state_message
    sentence = selectors.why_waiting(job=rows[second.pk])
    assert sentence.startswith("Waiting for 8 nvidia.com/gpu of flavor h100: team quota 8 guaranteed + 0 burst, "
                               "8 in use by 1 job. Scheduler: ")
    assert words in sentence


def test_a_higher_tier_preempts_and_the_submitter_is_told(any_simulating_sandbox, run_on_commit, mailoutbox):
    """Kueue: the team's ClusterQueue preempts withinClusterQueue LowerPriority."""
    simulating_sandbox, backend = any_simulating_sandbox, "kueue"
    world = build_world(simulating_sandbox.url, backend, guaranteed=8, burst=0)
    low = submit(world, run_on_commit, name="cheap", workers=1, gpus_per_worker=8,
                 priority_tier=world["tiers"]["standard"])
    step(simulating_sandbox, 0)
    step(simulating_sandbox, 5)
    assert sync(world)[low.pk].state == JobState.RUNNING
    high = submit(world, run_on_commit, name="deadline", workers=1, gpus_per_worker=8,
                  priority_tier=world["tiers"]["urgent"])
    step(simulating_sandbox, 6)
    with run_on_commit():
        rows = sync(world)
    assert (rows[low.pk].state, rows[high.pk].state) == (JobState.PREEMPTED, JobState.QUEUED)
    assert rows[high.pk].state_message.endswith("Pending the preemption of 1 workload(s)")
    step(simulating_sandbox, 7)
    with run_on_commit():
        rows = sync(world)
    assert (rows[low.pk].state, rows[high.pk].state) == (JobState.PREEMPTED, JobState.ADMITTED)
    assert rows[low.pk].state_message
    assert [m.subject for m in mailoutbox] == ["Job cheap preempted"]
    assert pods(world, low) == []


def test_on_volcano_a_higher_tier_waits_for_a_full_queue(simulating_sandbox, run_on_commit, mailoutbox):
    """Volcano at its default configuration has no preempt action, and even with one a PodGroup its queue cannot
    enqueue (proportion: the queue is at its capability) is never a preemptor (actions/preempt skips Pending
    jobs). The urgent job waits, saying why in Volcano's words."""
    world = build_world(simulating_sandbox.url, "volcano", guaranteed=8, burst=0)
    low = submit(world, run_on_commit, name="cheap", workers=1, gpus_per_worker=8,
                 priority_tier=world["tiers"]["standard"])
    step(simulating_sandbox, 0)
    step(simulating_sandbox, 5)
    high = submit(world, run_on_commit, name="deadline", workers=1, gpus_per_worker=8,
                  priority_tier=world["tiers"]["urgent"])
    step(simulating_sandbox, 6)
    with run_on_commit():
        rows = sync(world)
    assert (rows[low.pk].state, rows[high.pk].state) == (JobState.RUNNING, JobState.QUEUED)
    assert rows[high.pk].state_message == "queue resource quota insufficient: insufficient nvidia.com/gpu"
    assert mailoutbox == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_job_is_failed_with_the_reason(any_simulating_sandbox, run_on_commit, backend):
    simulating_sandbox = any_simulating_sandbox
    world = build_world(simulating_sandbox.url, backend)
    job = submit(world, run_on_commit, kind="batch", name="eval", workers=1)
    step(simulating_sandbox, 0)
    simulating_sandbox.simulator.plan("nlp", job.object_name, outcome="fail")
    step(simulating_sandbox, 5)
    step(simulating_sandbox, 105)
    row = sync(world)[job.pk]
    words = "BackoffLimitExceeded" if backend == "kueue" else "failed with exit code 1"
    assert row.state == JobState.FAILED and words in row.state_message
    assert row.finished_at is not None


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancel_frees_the_quota_and_resubmit_runs_again(simulating_sandbox, run_on_commit, backend):
    world = build_world(simulating_sandbox.url, backend, guaranteed=8, burst=0)
    running = submit(world, run_on_commit, name="long", workers=1, gpus_per_worker=8)
    waiting = submit(world, run_on_commit, name="next", workers=1, gpus_per_worker=8)
    step(simulating_sandbox, 0)
    step(simulating_sandbox, 5)
    rows = sync(world)
    assert (rows[running.pk].state, rows[waiting.pk].state) == (JobState.RUNNING, JobState.QUEUED)
    with run_on_commit():
        services.job_cancel(actor=world["member"], job=rows[running.pk])
    step(simulating_sandbox, 6)
    rows = sync(world)
    assert (rows[running.pk].state, rows[waiting.pk].state) == (JobState.CANCELLED, JobState.ADMITTED)
    assert pods(world, running) == []  # the job's pods went with it
    with run_on_commit():
        again = services.job_resubmit(actor=world["member"], job=rows[running.pk])
    step(simulating_sandbox, 11)
    rows = sync(world)
    assert (rows[waiting.pk].state, rows[again.pk].state) == (JobState.RUNNING, JobState.QUEUED)
    step(simulating_sandbox, 111)  # the job that waited ends, and the resubmitted one takes its place
    rows = sync(world)
    assert (rows[waiting.pk].state, rows[again.pk].state) == (JobState.SUCCEEDED, JobState.ADMITTED)
    step(simulating_sandbox, 116)
    assert sync(world)[again.pk].state == JobState.RUNNING


def test_a_sync_writes_alike_changes_at_once_and_nothing_when_nothing_is_new(simulating_sandbox, run_on_commit,
                                                                       django_assert_max_num_queries):
    world = build_world(simulating_sandbox.url, "kueue", guaranteed=8, burst=8)
    for i in range(6):
        submit(world, run_on_commit, name=f"small-{i}", workers=1, gpus_per_worker=1)
    step(simulating_sandbox, 0)
    step(simulating_sandbox, 5)
    # read, one UPDATE for the six jobs that moved alike, one closing their wait stretches, the savepoint
    with django_assert_max_num_queries(5):
        assert job_sync.job_status_sync(cluster=world["cluster"])["changed"] == 6
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.RUNNING}
    with django_assert_max_num_queries(1):
        counts = job_sync.job_status_sync(cluster=world["cluster"])
    assert (counts["jobs"], counts["changed"], counts["lists"]) == (6, 0, 4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["pytorch", "ray", "batch"])
def test_the_timeline_is_the_clusters_however_late_the_sync(simulating_sandbox, run_on_commit, backend, kind):
    """The sandbox's clock (T0) is weeks away from the sync's: admitted at T0, pods running at T0+5, done at
    T0+105. The row says exactly when each thing happened, by the cluster's clock, not when a sync saw it."""
    world = build_world(simulating_sandbox.url, backend)
    job = submit(world, run_on_commit, kind=kind, name=f"{kind}-late")
    for clock, state in ((0, JobState.ADMITTED), (5, JobState.RUNNING)):
        step(simulating_sandbox, clock)
        assert sync(world)[job.pk].state == state
    step(simulating_sandbox, 105)
    done = sync(world)[job.pk]
    assert done.state == JobState.SUCCEEDED
    assert (done.admitted_at, done.started_at, done.finished_at) == (at(0), at(5), at(105))
    assert done.run_seconds == 100


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)
