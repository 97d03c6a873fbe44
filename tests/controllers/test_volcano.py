"""The portal on the real Volcano, and the same scenarios on the sandbox's simulator (`volcano_target`): a queue
applied from an approved quota and opened by Volcano's controller, a job running and the next one waiting for the
queue's quota in Volcano's words, the quota page's in-use figure from Volcano's status, and a gang that passes the
queue's quota but does not fit on the nodes (minAvailable). What each target showed is recorded for
bench/CONTROLLERS.md."""

import pytest

from composition import reconcile
from jobs.choices import JobState
from portal import kube
from quotas import selectors as quota_selectors
from tests.controllers import scenarios
from tests.controllers.conftest import build_world_on, wait_for

pytestmark = [pytest.mark.controllers, pytest.mark.django_db(transaction=True)]


def test_an_approved_quota_becomes_a_queue_that_volcano_opens(volcano_target):
    world = build_world_on(volcano_target)
    client = kube.client_for_cluster(world["cluster"])

    def opened():
        queue = client.get("scheduling.volcano.sh/v1beta1", "Queue", "nlp")
        return queue and queue.get("status", {}).get("state") == "Open" and queue

    queue = wait_for(opened, what="Queue nlp Open")
    assert queue["spec"]["capability"]["nvidia.com/gpu"] == "16"


def test_one_job_runs_and_the_next_waits_in_volcanos_words(volcano_target, run_on_commit, observations):
    world = build_world_on(volcano_target, guaranteed=8, burst=0)
    jobs = scenarios.queued_behind(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("volcano: one job runs, the next waits for quota", {})[volcano_target.kind] = seen
    assert seen["admitted"] == ["first"]
    assert seen["jobs"]["first"]["state"] == JobState.RUNNING
    waiting = seen["jobs"]["second"]
    assert waiting["state"] == JobState.QUEUED
    # proportion's enqueue refusal (pkg/scheduler/plugins/proportion), an Event on the PodGroup.
    assert waiting["message"] == "queue resource quota insufficient: insufficient nvidia.com/gpu", waiting["message"]
    assert waiting["why_waiting"] == (
        "Waiting for 8 nvidia.com/gpu of flavor h100: team quota 8 guaranteed + 0 burst, 8 in use by 1 job. "
        f"Scheduler: {waiting['message']}")
    assert waiting["phase"] == "Pending"

    def in_use():
        reconcile.reconcile_sweep()
        [held] = quota_selectors.team_held_quotas(team=world["team"])
        return held.in_use == 8

    wait_for(in_use, what="8 in use from the cluster's status")


def test_a_gang_that_passes_the_quota_but_not_the_nodes_waits_for_room(volcano_target, run_on_commit, observations):
    world = build_world_on(volcano_target, guaranteed=16, burst=0, nodes=2)
    jobs = scenarios.gang_does_not_fit(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("volcano: a gang that does not fit the nodes", {})[volcano_target.kind] = seen
    assert seen["jobs"]["small"]["state"] == JobState.RUNNING
    gang = seen["jobs"]["gang"]
    assert gang["state"] == JobState.QUEUED
    assert gang["phase"] == "Inqueue"
    assert gang["why_waiting"].startswith(
        "Placement, not quota, is what blocks: Volcano let the job into its queue (16 guaranteed + 0 burst, 4 in use), "
        "but its nodes have no room for all 2 workers together. Scheduler: "), gang["why_waiting"]
    assert "/2 tasks in gang unschedulable: pod group is not ready" in gang["message"], gang["message"]


def test_a_rack_bound_job_is_placed_in_a_hypernode_of_the_label_discoverer(volcano_target, run_on_commit,
                                                                          observations):
    """Volcano's HyperNodes built by its controller's label discoverer from the nodes' rack and block labels (the
    configuration the admin console shows): a job with a hard network topology within one rack lands in r1, and the
    next, with quota to spare, waits for a rack with room."""
    world = build_world_on(volcano_target, guaranteed=32, burst=0, nodes=4, levels=scenarios.LEVELS,
                           node_labels=scenarios.RACKS)
    volcano_target.discover_hypernodes(scenarios.LEVELS)
    client = kube.client_for_cluster(world["cluster"])
    wait_for(lambda: len(client.list("topology.volcano.sh/v1alpha1", "HyperNode")) >= 4,
             what="HyperNodes for racks r1, r2, r3 and block b1")
    jobs = scenarios.rack_bound(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("volcano: a rack-bound job placed in a HyperNode", {})[volcano_target.kind] = seen
    assert seen["jobs"]["ring"]["placement"] == "Placed; all workers in rack r1 (as required)."
    waiting = seen["jobs"]["ring-2"]
    assert waiting["state"] == JobState.QUEUED
    assert waiting["why_waiting"].startswith(
        "Placement, not quota, is what blocks: Volcano let the job into its queue (32 guaranteed + 0 burst, 16 in "
        "use), but its nodes have no room for all 2 workers together within one rack (hard network topology)"), \
        waiting["why_waiting"]
