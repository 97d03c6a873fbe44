"""The portal on the real Volcano, and the same scenarios on the sandbox's simulator (`volcano_target`): a queue
applied from an approved quota and opened by Volcano's controller, a job running and the next one waiting for the
queue's quota in Volcano's words, the quota page's in-use figure from Volcano's status, and a gang that passes the
queue's quota but does not fit on the nodes (minAvailable). What each target showed is recorded for
bench/CONTROLLERS.md."""

import pytest

from composition import reconcile
from jobs.choices import JobState, WaitReason
from jobs.models import Job
from jobs.waits import wait_reason
from portal import kube
from quotas import selectors as quota_selectors
from tenants.models import Team
from tests.controllers import scenarios
from tests.controllers.conftest import build_world_on, pod_story, wait_for, wait_in_use

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

    wait_in_use(world["team"], 8, what="8 in use from the cluster's status")


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



def test_devices_claimed_through_dra_under_volcano(volcano_target_dra, run_on_commit, observations):
    """Dynamic Resource Allocation under Volcano: its predicates plugin (Kubernetes' DynamicResources plugin inside)
    allocates each worker's claim from the nodes' ResourceSlices and the job runs. Counting claims against a Queue
    (`deviceclass/<class>`) is v1.15's capacity plugin (pkg/scheduler/plugins/capacity/capacity.go,
    DeviceClassCountPrefix), which the simulator plays; the v1.14.1 built here counts none (nor does proportion, in
    either release), so the job over the quota passes enqueue and it is the team's ResourceQuota, which caps the
    flavor's devices at guaranteed + burst, that refuses its worker's claim: Volcano then says only that the claim
    is not created yet. The page says quota either way."""
    target = volcano_target_dra
    world = build_world_on(target, guaranteed=8, burst=0, dra=True)
    jobs = scenarios.devices_claimed(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("volcano: devices claimed through DRA", {})[target.kind] = seen
    assert seen["jobs"]["first"]["state"] == JobState.RUNNING
    devices = scenarios.allocated_devices(world, jobs["first"])
    assert len(devices) == 8 and len(set(devices)) == 8, devices
    assert scenarios.allocated_devices(world, jobs["second"]) == []
    waiting = seen["jobs"]["second"]
    assert waiting["state"] == JobState.QUEUED
    assert wait_reason(waiting["state"], waiting["message"]) == WaitReason.QUOTA
    held = ("Waiting for 4 gpu.nvidia.com/devices of flavor h100-dra: team quota 8 guaranteed + 0 burst, 8 in use by "
            "1 job")
    if target.kind == "controllers":
        # Volcano's scheduler bound each pod to the node whose slice its claim's devices came from.
        assert scenarios.claims_on_their_pods_nodes(world, jobs["first"]), pod_story(world)
        assert waiting["phase"] == "Inqueue"
        assert waiting["message"].endswith(
            '0/2 nodes are unavailable: 2 plugin DynamicResources pre-predicates failed pod "nlp/<job:second>-main-0": '
            "ResourceClaim not created yet."), waiting["message"]
        assert waiting["why_waiting"] == (
            f"{held}; the team's ResourceQuota refuses its workers' device claims until devices are free (the "
            f"scheduler's queue does not count them). Scheduler: {waiting['message']}"), waiting["why_waiting"]
        # The resourceclaim controller's own words, on the pod (kubernetes pkg/controller/resourceclaim).
        client = kube.client_for_cluster(world["cluster"])
        refusals = {e["message"].split(" is forbidden: ")[-1] for e in client.list("v1", "Event", namespace="nlp")
                    if e.get("reason") == "FailedResourceClaimCreation"}
        assert refusals == {
            "exceeded quota: gpu-portal-quota, requested: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=4, "
            "used: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=8, limited: "
            "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=8"}, refusals
    else:
        assert waiting["phase"] == "Pending"
        assert waiting["message"] == "queue resource quota insufficient: insufficient deviceclass/gpu.nvidia.com"
        assert waiting["why_waiting"] == f"{held}. Scheduler: {waiting['message']}", waiting["why_waiting"]

    wait_in_use(world["team"], 8, what="8 devices in use from the cluster's status")


def test_another_team_reclaims_the_gpus_a_team_borrowed(volcano_target_reclaim, run_on_commit, observations):
    """Borrowing and its reclaim, under the scheduler configuration the portal gives operators (the reclaim action,
    the capacity plugin: `Volcano.scheduler_setup`). nlp (8 guaranteed + 8 burst, CPU and memory quota far above
    what its jobs use) runs two 8-GPU jobs; vision (8 + 0) submits one when no node has room, and Volcano's reclaim
    evicts a pod of nlp's queue, which is above its deserved share, so vision's job runs.

    The portal's queues set no guarantee (the capacity plugin would cap every other queue at the cluster less it,
    its realCapability in plugins/capacity/capacity.go, and vision's idle 8 would not be nlp's to borrow). The
    cluster has a third node held by a pod outside the queues, which both targets count on its node.

    Volcano does not tell a queue's borrowing job from its own: the capacity plugin judges the queue as a whole, and
    the reclaim action evicts the first victim on the first node it tries, so either of nlp's jobs may go (Kueue
    takes the borrowing one). Queues that guaranteed CPU and memory (before they guaranteed nothing) kept both:
    checkGuaranteeConstraint refuses a victim whose queue would fall below any guaranteed resource, and nlp, without
    either job, would have fallen below its 256-CPU guarantee. Run so once, on both targets, vision's
    job waited the whole minute with "0/3 nodes are unavailable: 3 Insufficient nvidia.com/gpu" (the simulator: the
    gang's words alone) and neither of nlp's jobs was evicted."""
    target = volcano_target_reclaim
    world = build_world_on(target, guaranteed=8, burst=8, nodes=3)
    target.occupy("h100-2", {"nvidia.com/gpu": 8, "cpu": 1, "memory": "1Gi"})
    jobs, waited = scenarios.reclaimed_from_the_borrower(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    seen["waited"] = waited
    observations.setdefault("volcano: borrowing and its reclaim", {})[target.kind] = seen
    [victim] = seen["preempted"]
    assert victim in ("base", "burst"), seen
    kept = "burst" if victim == "base" else "base"
    assert seen["jobs"][kept]["state"] == JobState.RUNNING
    assert seen["jobs"]["own"]["state"] in scenarios.STARTED
    preempted = seen["jobs"][victim]
    client = kube.client_for_cluster(world["cluster"])
    # Volcano's job controller restarted the victim (the portal's PodEvicted policy) and wrote no reason; the
    # reclaim is told only by the scheduler's Events, on the PodGroup and on the evicted pod, which name no job.
    assert preempted["message"].startswith(
        "Volcano reclaimed its GPUs for a queue below its guaranteed share and restarted it (restart 1)."), preempted
    assert preempted["outcome"].startswith(
        "Preempted: Volcano reclaimed its GPUs for a queue below its guaranteed share; this job's team held more "
        "than its own share."), preempted
    said = {(e["involvedObject"]["kind"], e.get("type"), e.get("message"))
            for e in client.list("v1", "Event", namespace="nlp") if e.get("reason") == "Evict"}
    assert said == {("PodGroup", "Normal", "reclaim"), ("Pod", "Warning", "Pod is evicted, because of reclaim")}, said
    [restarted] = [j for j in client.list("batch.volcano.sh/v1alpha1", "Job", namespace="nlp")
                   if j["metadata"]["name"] == Job.objects.get(pk=jobs[victim].pk).object_name]
    assert restarted["status"]["retryCount"] == 1, restarted["status"]
    assert not {"reason", "message"} & set(restarted["status"]["state"]), restarted["status"]

    def in_use():
        reconcile.reconcile_sweep()
        figures = {team.slug: [held.in_use for held in quota_selectors.team_held_quotas(team=team)]
                   for team in Team.objects.all()}
        return figures["vision"] == [8] and figures

    seen["in_use"] = wait_for(in_use, what="vision's 8 in use once the reclaim is done")
    # The real victim's restarted pod waits for a node; the team's ResourceQuota counts a pending pod's requests
    # (16), the Queue's `allocated` only what Volcano placed, which the page shows (before, it read 16 here).
    assert seen["in_use"] == {"nlp": [8], "vision": [8]}, seen["in_use"]
    # vision's job, if the sync saw it waiting before Volcano made room (the reclaim comes within a session or
    # two): let into its queue, with no node free.
    for sighting in waited:
        assert sighting["why_waiting"].startswith(
            "Placement, not quota, is what blocks: Volcano let the job into its queue (8 guaranteed + 0 burst, 0 in "
            "use), but its nodes have no room for it. Scheduler: 1/1 tasks in gang unschedulable: pod group is not "
            "ready"), sighting
