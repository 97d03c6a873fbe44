"""A job kept within one rack, forecast against each rack's free GPUs, end to end on a sandbox whose Kueue places
jobs with Topology-Aware Scheduling: the racks come from the cluster's Nodes, the running job's share of them from
its pods or, as here, from the placement Kueue recorded. The rack-bound job waits for the job whose end frees a
whole rack, though the flavor's total would fit it now, says so, and starts when the estimate said."""

from datetime import UTC, datetime

import pytest

from jobs import estimates, nodes, services
from jobs.choices import JobState
from jobs.models import Job
from tests.jobs.conftest import T0, build_world, reconcile_cluster, step
from tests.jobs.test_simulated import sync

pytestmark = pytest.mark.django_db
LEVELS = [{"name": "rack", "node_label": "example.com/rack"}, {"name": "host", "node_label": "kubernetes.io/hostname"}]


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def add_node(sb, name, rack):
    sb.add_node(name, gpus=8, labels={"example.com/rack": rack, "kubernetes.io/hostname": name,
                                      "example.com/pool": "reserved"})


def submit(world, run_on_commit, name, workers, **options):
    with run_on_commit():
        return services.job_submit(actor=world["member"], team=world["team"], flavor=world["flavor"], kind="batch",
                                   name=name, image="ghcr.io/acme/train:1.2", command=["python", "train.py"],
                                   workers=workers, gpus_per_worker=8, cpu_per_worker=4, memory_gib_per_worker=32,
                                   **options)


def test_a_rack_bound_job_waits_for_a_whole_rack_though_the_flavor_total_fits(simulating_sandbox, run_on_commit):
    sb = simulating_sandbox
    world = build_world(sb.url, "kueue", guaranteed=24, burst=0)
    cluster = world["cluster"]
    cluster.topology_levels = LEVELS
    cluster.save()
    world["flavor"].node_labels = {"example.com/pool": "reserved"}
    world["flavor"].save()
    for name in ("n1", "n2"):
        add_node(sb, name, "r1")
    reconcile_cluster(cluster)
    first = submit(world, run_on_commit, "first", 1, topology_level="host", max_runtime_minutes=5)
    step(sb, 0)
    sb.simulator.plan("nlp", first.object_name, duration=10**6)  # runs until its limit stops it
    step(sb, 5)
    assert sync(world)[first.pk].state in (JobState.ADMITTED, JobState.RUNNING)
    add_node(sb, "n3", "r2")  # 16 GPUs free now: one node of r1, and r2's one
    pair = submit(world, run_on_commit, "pair", 2, topology_level="rack", max_runtime_minutes=60)
    step(sb, 6)
    assert sync(world)[pair.pk].state == JobState.QUEUED
    nodes._nodes.clear()  # the nodes were read before n3 came (they are reused for a minute)
    estimates.job_estimates_refresh(cluster=cluster, now=at(10))
    waiting = Job.objects.get(pk=pair.pk)
    said = waiting.estimate
    assert said["kind"] == "start" and said["basis"]["domain"] == {"level": "rack", "needs": 16, "most_free": 8}
    assert "it needs 16 h100 in one rack, and no rack has more than 8 free, and 8 h100 free up when first ends" \
        in said["sentence"]
    predicted = datetime.fromisoformat(said["likely"].replace("Z", "+00:00"))
    assert predicted >= at(290)  # not now, as the flavor's 16 free GPUs alone would say
    for clock in range(20, 500, 20):
        step(sb, clock)
    started = sync(world)[pair.pk]
    assert started.admitted_at and abs((predicted - started.admitted_at).total_seconds()) <= 60
