"""The portal on the real Kueue, and the same scenarios on the sandbox's simulator (`kueue_target`): queues applied
from an approved quota through Kueue's own webhooks, a job admitted and running, a job waiting for quota in
Kueue's words, the quota page's in-use figure from Kueue's status, priority preemption, and borrowing in a cohort
with its reclaim. What each target showed is recorded for bench/CONTROLLERS.md."""

import re

import pytest

from jobs.choices import JobState
from portal import kube
from tests.controllers import scenarios
from tests.controllers.conftest import build_world_on, pod_story, wait_for, wait_in_use

pytestmark = [pytest.mark.controllers, pytest.mark.django_db(transaction=True)]

# Kueue's preemption message (pkg/scheduler/preemption/preemption.go preemptionMessage): the preemptor's UIDs (as
# `scenarios.observe` writes them), the reason, and both workloads' paths in the cohort tree.
PREEMPTED = (r"Preempted to accommodate a workload \(UID: <uid>, JobUID: <uid>\) due to {reason}; "
             r"preemptor path: {preemptor}; preemptee path: {preemptee}")


def conditions(obj: dict) -> dict[str, dict]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


def test_an_approved_quota_becomes_queues_that_kueue_makes_active(kueue_target):
    world = build_world_on(kueue_target)
    client = kube.client_for_cluster(world["cluster"])

    def active(kind, name, namespace=None):
        obj = client.get("kueue.x-k8s.io/v1beta2", kind, name, namespace=namespace)
        return obj and conditions(obj).get("Active", {}).get("status") == "True" and obj

    cluster_queue = wait_for(lambda: active("ClusterQueue", "nlp"), what="ClusterQueue nlp Active")
    assert conditions(cluster_queue)["Active"]["reason"] == "Ready"
    assert cluster_queue["spec"]["cohortName"] == "gpu"
    local_queue = wait_for(lambda: active("LocalQueue", "default", "nlp"), what="LocalQueue nlp/default Active")
    assert local_queue["spec"]["clusterQueue"] == "nlp"


def test_one_job_runs_and_the_next_waits_in_kueues_words(kueue_target, run_on_commit, observations):
    world = build_world_on(kueue_target, guaranteed=8, burst=0)
    jobs = scenarios.queued_behind(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("kueue: one job runs, the next waits for quota", {})[kueue_target.kind] = seen
    # The Job was created unsuspended; only Kueue's mutating webhook (the real one, served on loopback) suspends
    # a queued Job, so the waiting one being suspended shows every object went through upstream's admission.
    second = kube.client_for_cluster(world["cluster"]).get("batch/v1", "Job", jobs["second"].object_name, "nlp")
    assert second["spec"]["suspend"] is True
    assert seen["admitted"] == ["first"]
    assert seen["jobs"]["first"]["state"] == JobState.RUNNING
    assert seen["jobs"]["first"]["placement"] == "Placed on flavor h100."
    waiting = seen["jobs"]["second"]
    assert waiting["state"] == JobState.QUEUED
    # Kueue's scheduler words (pkg/scheduler/flavorassigner): the simulator writes the same.
    assert waiting["message"] == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                                  "nvidia.com/gpu in flavor h100, 8 more needed"), waiting["message"]
    assert waiting["why_waiting"] == (
        "Waiting for 8 nvidia.com/gpu of flavor h100: team quota 8 guaranteed + 0 burst, 8 in use by 1 job. "
        f"Scheduler: {waiting['message']}")
    assert waiting["conditions"]["QuotaReserved"] == "False Pending"

    # "In use" on the quota page is the ClusterQueue's flavorsUsage that Kueue wrote, as the sweep records it.
    wait_in_use(world["team"], 8, what="8 in use from Kueue's ClusterQueue status")


def test_a_higher_tier_preempts_within_the_team_and_the_victim_says_why(kueue_target, run_on_commit, mailoutbox,
                                                                         observations):
    world = build_world_on(kueue_target, guaranteed=8, burst=0)
    jobs = scenarios.priority_preemption(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("kueue: a higher tier preempts within the team", {})[kueue_target.kind] = seen
    assert seen["preempted"] == ["cheap"]
    assert seen["jobs"]["deadline"]["state"] in scenarios.STARTED
    victim = seen["jobs"]["cheap"]
    assert re.fullmatch(PREEMPTED.format(reason="prioritization in the ClusterQueue", preemptor="/gpu/nlp",
                                         preemptee="/gpu/nlp"), victim["message"]), victim["message"]
    assert victim["outcome"].startswith("Preempted: a higher-priority job of the same team needed the GPUs.")
    assert victim["conditions"]["Evicted"] == "True Preempted"
    assert victim["conditions"]["Preempted"] == "True InClusterQueue"
    assert [m.subject for m in mailoutbox if "preempted" in m.subject] == ["Job cheap preempted"]


def test_borrowing_in_the_cohort_and_its_reclaim(kueue_target, run_on_commit, observations):
    world = build_world_on(kueue_target, guaranteed=8, burst=8)
    jobs = scenarios.borrow_and_reclaim(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("kueue: borrowing in the cohort and its reclaim", {})[kueue_target.kind] = seen
    assert seen["preempted"] == ["burst"]
    assert seen["jobs"]["base"]["state"] == JobState.RUNNING
    assert seen["jobs"]["own"]["state"] in scenarios.STARTED
    victim = seen["jobs"]["burst"]
    assert re.fullmatch(PREEMPTED.format(reason="reclamation within the cohort", preemptor="/gpu/vision",
                                         preemptee="/gpu/nlp"), victim["message"]), victim["message"]
    assert victim["outcome"].startswith("Preempted: another team took back the guaranteed quota this job was "
                                        "borrowing.")
    assert victim["conditions"]["Preempted"] == "True InCohortReclamation"



def test_a_job_whose_pods_never_become_ready_is_evicted_and_queued_again(kueue_target_pods_ready_timeout,
                                                                         run_on_commit, observations):
    """WaitForPodsReady, on by default since v0.19 (30 minutes; 15 s here): admitted on quota alone, with no node
    to run on, the job is evicted when the timeout passes, its quota released, and it queues again after a
    backoff. The page says so, and the wait counts as placement, not quota."""
    target = kueue_target_pods_ready_timeout
    world = build_world_on(target, guaranteed=8, burst=0, nodes=0)
    jobs = scenarios.pods_never_ready(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("kueue: pods never ready, evicted by the PodsReady timeout", {})[target.kind] = seen
    stuck = seen["jobs"]["stuck"]
    assert stuck["state"] == JobState.QUEUED
    # pkg/controller/core/workload_controller.go reconcileNotReadyTimeout.
    assert stuck["message"] == "Exceeded the PodsReady timeout nlp/<record:stuck>", stuck["message"]
    assert stuck["conditions"]["Evicted"] == "True PodsReadyTimeout"
    assert stuck["why_waiting"] == (
        "Its pods did not all start in time after Kueue admitted it (waitForPodsReady), so Kueue released its "
        "quota and queues it again after a backoff: team quota 8 guaranteed + 0 burst, 0 in use by 0 jobs. "
        "Scheduler: Exceeded the PodsReady timeout nlp/<record:stuck>")
    [last] = jobs["stuck"].waits.order_by("-started_at")[:1]
    assert (last.reason, last.ended_at) == ("placement", None)


def test_a_rack_bound_job_under_kueues_topology_aware_scheduling(kueue_target, run_on_commit, observations):
    """Kueue TAS: the cluster's levels become a Topology that the flavor's ResourceFlavor names, and the team's
    ClusterQueue covers CPU, memory and GPUs with that flavor in one resource group, so a pod set that requires a
    rack gets all its resources from a flavor with the topology (pkg/scheduler/flavorassigner/
    tas_flavorassigner.go). Kueue places both workers inside rack r1 (the Workload's topologyAssignment, the pods on
    r1's nodes) and keeps the next job, with quota to spare, waiting for a rack."""
    world = build_world_on(kueue_target, guaranteed=32, burst=0, nodes=4, levels=scenarios.LEVELS,
                           node_labels=scenarios.RACKS)
    jobs = scenarios.rack_bound(world, run_on_commit, running=True)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("kueue: a rack-bound job placed by topology", {})[kueue_target.kind] = seen
    assert seen["admitted"] == ["ring"]
    ring = seen["jobs"]["ring"]
    assert ring["state"] == JobState.RUNNING, ring
    assert ring["placement"] == "Placed on flavor h100; all workers in rack r1 (as required)."
    # What Kueue wrote: one pod set assigned every resource from h100, its 2 pods in rack r1's nodes.
    client = kube.client_for_cluster(world["cluster"])
    ring_row = jobs["ring"]
    ring_row.refresh_from_db()
    [workload] = [w for w in client.list("kueue.x-k8s.io/v1beta2", "Workload", namespace="nlp")
                  if any(ref["name"] == ring_row.object_name for ref in w["metadata"].get("ownerReferences") or [])]
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    assert set(assignment["flavors"].values()) == {"h100"}, assignment["flavors"]
    topology = assignment["topologyAssignment"]
    assert topology["levels"] and sum(scenarios.pod_counts(piece) for piece in topology["slices"]) == 2, topology
    rack_of = {node["metadata"]["name"]: node["metadata"]["labels"].get("example.com/rack")
               for node in client.list("v1", "Node")}

    def placed():
        pods = client.list("v1", "Pod", namespace="nlp", label_selector=f"gpu-portal.io/job={ring_row.pk}")
        nodes = [p["spec"].get("nodeName") for p in pods]
        return len(nodes) == 2 and all(nodes) and nodes

    assert {rack_of[node] for node in wait_for(placed, what="ring's pods bound to nodes")} == {"r1"}
    waiting = seen["jobs"]["ring-2"]
    assert waiting["state"] == JobState.QUEUED
    # Kueue's notFitMessage with its exclusion stats (pkg/cache/scheduler/tas_flavor_snapshot.go): r1's two nodes
    # are full; the simulator writes the same.
    assert re.fullmatch(r'couldn\'t assign flavors to pod set main: topology "gpu-portal-[0-9a-f]{10}" allows to fit '
                        r'only 1 out of 2 pod\(s\)\. Total nodes: 4; excluded: resource "nvidia\.com/gpu": 2',
                        waiting["message"]), waiting["message"]
    assert waiting["why_waiting"] == (
        "Placement, not quota, is what blocks: no rack has room for all 2 workers together (32 guaranteed + 0 burst, "
        f"16 in use). Scheduler: {waiting['message']}"), waiting["why_waiting"]

    # "In use" on the quota page: the ClusterQueue's flavorsUsage for h100, as the sweep records it.
    wait_in_use(world["team"], 16, what="16 in use from Kueue's ClusterQueue status")

def test_devices_claimed_through_dra_are_counted_by_kueue_and_allocated_by_kube_scheduler(kueue_target_dra,
                                                                                          run_on_commit,
                                                                                          observations):
    """Dynamic Resource Allocation: the DRA flavor's quota becomes the ClusterQueue's quota of the logical resource
    the portal maps the DeviceClass to in Kueue's Configuration (`deviceClassMappings`); Kueue counts each worker's
    claim (from the job's ResourceClaimTemplate) against it, kube-scheduler allocates the devices from the nodes'
    ResourceSlices, and kwok runs the pods. The job over the quota waits in Kueue's words."""
    target = kueue_target_dra
    world = build_world_on(target, guaranteed=8, burst=0, dra=True)
    jobs = scenarios.devices_claimed(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    observations.setdefault("kueue: devices claimed through DRA", {})[target.kind] = seen
    assert seen["admitted"] == ["first"]
    first = seen["jobs"]["first"]
    assert first["state"] == JobState.RUNNING
    assert first["placement"] == "Placed on flavor h100-dra."
    # The Workload counts each pod's 4 claimed devices as the mapped resource: 2 pods, 8 devices.
    client = kube.client_for_cluster(world["cluster"])
    [workload] = [w for w in client.list("kueue.x-k8s.io/v1beta2", "Workload", namespace="nlp")
                  if w["metadata"]["ownerReferences"][0]["name"] == jobs["first"].object_name]
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"]["gpu.nvidia.com/devices"] == "h100-dra"
    assert assignment["resourceUsage"]["gpu.nvidia.com/devices"] == "8"
    # Each worker's claim holds 4 devices of one node's slice (the pool is the node).
    devices = scenarios.allocated_devices(world, jobs["first"])
    assert len(devices) == 8 and len(set(devices)) == 8, devices
    if target.kind == "controllers":
        # kube-scheduler allocated each claim on the node it bound the claim's pod to: the slice's pool.
        assert scenarios.claims_on_their_pods_nodes(world, jobs["first"]), pod_story(world)
    waiting = seen["jobs"]["second"]
    assert waiting["state"] == JobState.QUEUED
    assert waiting["message"] == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                                  "gpu.nvidia.com/devices in flavor h100-dra, 4 more needed"), waiting["message"]
    assert waiting["why_waiting"] == (
        "Waiting for 4 gpu.nvidia.com/devices of flavor h100-dra: team quota 8 guaranteed + 0 burst, 8 in use by 1 "
        f"job. Scheduler: {waiting['message']}"), waiting["why_waiting"]
    assert scenarios.allocated_devices(world, jobs["second"]) == []

    wait_in_use(world["team"], 8, what="8 devices in use from Kueue's ClusterQueue status")
