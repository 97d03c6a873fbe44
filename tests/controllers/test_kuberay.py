"""The portal's Ray jobs on the real KubeRay operator, under the real Kueue (its RayJob integration: the queue-name
label, suspend and admit) and the real Volcano (KubeRay's `--batch-scheduler=volcano` making the PodGroup), and
the same scenario on the sandbox's simulator (`ray_target`): a RayJob whose head and workers would fit the team's
CPU quota waits because KubeRay's submitter is counted too, says so in the scheduler's words and the portal's, and
starts once the CPUs are free. What each target showed is recorded for bench/CONTROLLERS.md."""

import pytest

from jobs.choices import JobState
from portal import kube
from portal.kube import quantity_float
from portal.upstream import KUEUE_API, VOLCANO_SCHEDULING_API
from tests.controllers import scenarios
from tests.controllers.conftest import build_world_on, wait_in_use

pytestmark = [pytest.mark.controllers, pytest.mark.django_db(transaction=True)]

# The scheduler's words for the submitter's 500m that does not fit: Kueue's flavor assigner on the submitter pod
# set (pkg/scheduler/flavorassigner), Volcano's proportion plugin refusing the PodGroup at enqueue (an Event).
# Whose CPU quota: the flavor's own under Kueue (each flavor of the ClusterQueue carries its CPU), the team's in the
# cluster under Volcano (the queue's capability).
CPU_QUOTA = {"kueue": "with flavor h100", "volcano": "in this cluster"}
WAITING_WORDS = {
    "kueue": "couldn't assign flavors to pod set submitter: insufficient unused quota for cpu in flavor "
             "h100, 500m more needed",
    "volcano": "queue resource quota insufficient: insufficient cpu",
}


def test_a_rayjob_waits_for_its_submitter_then_runs(ray_target, run_on_commit, observations):
    scheduler = ray_target.scheduler
    world = build_world_on(ray_target, guaranteed=16, burst=0, cpu_cores=16)
    jobs = scenarios.ray_job_waits_for_its_submitter(world, run_on_commit)
    seen = scenarios.observe(world, jobs)
    scenario = f"{scheduler} + kuberay: a RayJob waits for its submitter's CPU"
    observations.setdefault(scenario, {})[ray_target.kind] = seen
    assert seen["admitted"] == ["first"]
    waiting = seen["jobs"]["tune"]
    assert waiting["state"] == JobState.QUEUED
    assert waiting["message"] == WAITING_WORDS[scheduler], waiting["message"]
    # Head 4 + worker 4 fill the 8 CPUs left beside the batch job's 8; KubeRay's submitter (500m) does not fit.
    assert waiting["why_waiting"] == (
        "Waiting for CPU, not GPUs: its pods ask for 8.5 CPUs in all (a Ray head, 1 worker and KubeRay's submitter "
        f"of 0.5 CPU and 200Mi); the team's CPU quota {CPU_QUOTA[scheduler]} is 16 CPUs, 8 in use by 1 job. "
        f"Scheduler: {waiting['message']}")
    if scheduler == "kueue":
        assert waiting["conditions"]["QuotaReserved"] == "False Pending"
    else:
        assert waiting["phase"] == "Pending"

    jobs = scenarios.ray_job_starts_when_the_cpus_are_free(world, run_on_commit, jobs)
    seen = scenarios.observe(world, jobs)
    scenario = f"{scheduler} + kuberay: the RayJob starts when the CPUs are free"
    observations.setdefault(scenario, {})[ray_target.kind] = seen
    started = seen["jobs"]["tune"]
    # KubeRay reads a Ray job's status from the head's dashboard; kwok's pods run no Ray, so on the real operator
    # the RayJob stays `Running` with no job status, which the portal shows as admitted (its pods are running).
    assert started["state"] == (JobState.ADMITTED if ray_target.kind == "controllers" else JobState.RUNNING)
    client = kube.client_for_cluster(world["cluster"])
    tune = jobs["tune"]
    tune.refresh_from_db()
    if scheduler == "kueue":
        assert started["placement"] == "Placed on flavor h100."
        [workload] = [w for w in client.list(KUEUE_API, "Workload", namespace="nlp")
                      if w["metadata"]["ownerReferences"][0]["name"] == tune.object_name]
        usage = {a["name"]: {name: quantity_float(value) for name, value in a["resourceUsage"].items()
                             if quantity_float(value)}
                 for a in workload["status"]["admission"]["podSetAssignments"]}
        # Kueue v0.19 counts KubeRay's submitter Job as a pod set of its own (kubernetes-sigs/kueue#12405).
        assert usage["submitter"] == {"cpu": 0.5, "memory": 200 * 2**20}, usage
        assert usage["gpu-workers"]["nvidia.com/gpu"] == 8
    else:
        podgroup = client.get(VOLCANO_SCHEDULING_API, "PodGroup", f"ray-{tune.object_name}-pg", "nlp")
        # KubeRay's Volcano plugin: the head and the worker in the gang, the submitter only in minResources.
        assert podgroup["spec"]["minMember"] == 2
        assert podgroup["spec"]["queue"] == "nlp"
        assert quantity_float(podgroup["spec"]["minResources"]["cpu"]) == 8.5, podgroup["spec"]["minResources"]

    wait_in_use(world["team"], 8, what="8 in use from the scheduler's status")
