"""Scheduling scenarios, each derived from a behaviour of the pinned upstream release (named per test) and driven
through the sandbox's simulator with an explicit clock."""

from pathlib import Path

import pytest
import yaml

from sandbox import Sandbox
from sandbox.tests.test_simulator import (
    KUEUE,
    VOLCANO,
    condition,
    create,
    get,
    items,
    kueue_state,
    pod_template,
    podgroup_of,
    pods,
    step,
    vc_job,
    volcano_setup,
    workload_of,
)


@pytest.fixture
def sb():
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sandbox:
        for name in ("team-a", "team-b", "team-c"):
            create(sandbox, "v1", "Namespace", {"metadata": {"name": name}})
        yield sandbox


def flavors(sb, *names):
    for name in names:
        create(sb, KUEUE, "ResourceFlavor", {"metadata": {"name": name}, "spec": {}})


def priorities(sb, **values):
    for name, value in values.items():
        create(sb, KUEUE, "WorkloadPriorityClass", {"metadata": {"name": name}, "value": value})


def cluster_queue(sb, name, namespace, groups, *, cohort="", preemption=None):
    spec = {"namespaceSelector": {}, "resourceGroups": groups,
            "preemption": preemption or {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}}
    if cohort:
        spec["cohortName"] = cohort
    create(sb, KUEUE, "ClusterQueue", {"metadata": {"name": name}, "spec": spec})
    create(sb, KUEUE, "LocalQueue", {"metadata": {"name": "default", "namespace": namespace},
                                     "spec": {"clusterQueue": name}})


def gpu_group(nominal, borrowing=None, lending=None, flavor="h100"):
    resource = {"name": "nvidia.com/gpu", "nominalQuota": str(nominal)}
    if borrowing is not None:
        resource["borrowingLimit"] = str(borrowing)
    if lending is not None:
        resource["lendingLimit"] = str(lending)
    return {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": flavor, "resources": [resource]}]}


def gpu_job(sb, namespace, name, gpus, priority="", workers=1):
    """A batch Job whose pods ask for GPUs only (so only the GPU group matters)."""
    labels = {"kueue.x-k8s.io/queue-name": "default"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    template = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    return create(sb, "batch/v1", "Job", {"metadata": {"name": name, "namespace": namespace, "labels": labels},
                                          "spec": {"parallelism": workers, "completions": workers,
                                                   "template": template}})


# --- Kueue -------------------------------------------------------------------------------------------


def test_preemption_takes_the_minimal_victim_set(sb):
    """pkg/scheduler/preemption/preemption.go fillBackWorkloads: victims are taken lowest priority first until the
    preemptor fits, then any victim that still leaves room is spared. low (2) and mid (6) fill 8; high needs 6:
    taking low is not enough, taking mid is, and low goes back."""
    flavors(sb, "h100")
    priorities(sb, low=100, mid=500, high=1000)
    cluster_queue(sb, "cq-a", "team-a", [gpu_group(8)])
    gpu_job(sb, "team-a", "low", 2, "low")
    gpu_job(sb, "team-a", "mid", 6, "mid")
    step(sb, 0)
    gpu_job(sb, "team-a", "high", 6, "high")
    step(sb, 1)
    assert {n: kueue_state(sb, "team-a", n) for n in ("low", "mid", "high")} == {
        "low": "admitted", "mid": "preempted", "high": "pending"}
    # scheduler.go markPreemptionOutcome: the preemptor says whom it waits for, and is admitted next cycle.
    assert condition(workload_of(sb, "team-a", "high"), "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "6 more needed. Pending the preemption of 1 workload(s)")
    step(sb, 2)
    assert {n: kueue_state(sb, "team-a", n) for n in ("low", "mid", "high")} == {
        "low": "admitted", "mid": "preempted", "high": "admitted"}


def test_preemption_prefers_borrowers_in_other_cluster_queues(sb):
    """common/ordering.go CandidatesOrdering: workloads of other ClusterQueues come before the preemptor's own,
    whatever their priority; among equals the most recently admitted goes first."""
    flavors(sb, "h100")
    priorities(sb, low=100, mid=500, high=1000)
    cluster_queue(sb, "cq-a", "team-a", [gpu_group(8, borrowing=8)], cohort="pool")
    cluster_queue(sb, "cq-b", "team-b", [gpu_group(8, borrowing=8)], cohort="pool")
    gpu_job(sb, "team-a", "a-low", 4, "low")
    gpu_job(sb, "team-b", "b-first", 8, "high")
    step(sb, 0)
    gpu_job(sb, "team-b", "b-second", 4, "high")  # cq-b now borrows 4 of cq-a's quota
    step(sb, 1)
    gpu_job(sb, "team-a", "a-mid", 4, "mid")
    step(sb, 2)
    step(sb, 3)
    assert {n: kueue_state(sb, ns, n) for ns, n in (("team-a", "a-low"), ("team-b", "b-first"),
                                                    ("team-b", "b-second"), ("team-a", "a-mid"))} == {
        "a-low": "admitted", "b-first": "admitted", "b-second": "preempted", "a-mid": "admitted"}
    assert "reclamation within the cohort; preemptor path: /pool/cq-a; preemptee path: /pool/cq-b" in condition(
        workload_of(sb, "team-b", "b-second"), "Evicted")["message"]


@pytest.mark.parametrize(("lending", "expected"), [(None, "admitted"), (0, "pending")])
def test_borrowing_through_the_cohort_tree(sb, lending, expected):
    """pkg/cache/scheduler/resource_node.go: quota a department cohort's queue does not use is lent up to the
    cluster cohort and borrowed by another department's queue (within its borrowingLimit), unless lendingLimit
    keeps it local."""
    flavors(sb, "h100")
    create(sb, KUEUE, "Cohort", {"metadata": {"name": "cluster"}, "spec": {}})
    for dept in ("dept-x", "dept-y"):
        create(sb, KUEUE, "Cohort", {"metadata": {"name": dept}, "spec": {"parentName": "cluster"}})
    cluster_queue(sb, "cq-a", "team-a", [gpu_group(8, borrowing=8)], cohort="dept-x")
    cluster_queue(sb, "cq-c", "team-c", [gpu_group(8, borrowing=0, lending=lending)], cohort="dept-y")
    gpu_job(sb, "team-a", "wide", 8, workers=2)
    step(sb, 0)
    assert kueue_state(sb, "team-a", "wide") == expected
    if expected == "pending":
        assert condition(workload_of(sb, "team-a", "wide"), "QuotaReserved")["message"] == (
            "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
            "previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)")


def test_a_rayjobs_submitter_pod_is_counted(sb):
    """pkg/controller/jobs/rayjob/rayjob_controller.go addSubmitterPodSet: in K8sJobMode the submitter (500m CPU
    requested) is a pod set of its own, counted after the Ray pods. A quota that holds exactly the head and the
    workers does not hold the job."""
    flavors(sb, "default-cpu")
    cpu = {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-cpu", "resources": [
        {"name": "cpu", "nominalQuota": "3"}, {"name": "memory", "nominalQuota": "100Gi"}]}]}
    cluster_queue(sb, "cq-a", "team-a", [cpu])
    create(sb, "ray.io/v1", "RayJob", {
        "metadata": {"name": "tune", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"entrypoint": "python run.py", "shutdownAfterJobFinishes": True, "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": pod_template(0)},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                  "rayStartParams": {}, "template": pod_template(0)}]}}})
    step(sb, 0)
    waiting = condition(workload_of(sb, "team-a", "tune"), "QuotaReserved")
    assert (waiting["status"], waiting["reason"]) == ("False", "Pending")
    assert waiting["message"] == (
        "couldn't assign flavors to pod set submitter: insufficient quota for cpu in flavor default-cpu, "
        "previously considered podsets requests (3) + current podset request (500m) > maximum capacity (3)")


def test_one_flavor_per_resource_group(sb):
    """flavorassigner.go findFlavorForPodSets: a resource group's resources all get the flavor where every one of
    them fits; never CPU from one flavor and memory from another."""
    flavors(sb, "small", "large")
    group = {"coveredResources": ["cpu", "memory"], "flavors": [
        {"name": "small", "resources": [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota":
                                                                               "100Gi"}]},
        {"name": "large", "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota":
                                                                                "100Gi"}]}]}
    cluster_queue(sb, "cq-a", "team-a", [group])
    template = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "8", "memory": "1Gi"}}}]}}
    create(sb, "batch/v1", "Job", {"metadata": {"name": "cpu-heavy", "namespace": "team-a",
                                                "labels": {"kueue.x-k8s.io/queue-name": "default"}},
                                   "spec": {"template": template}})
    step(sb, 0)
    admission = workload_of(sb, "team-a", "cpu-heavy")["status"]["admission"]
    assert admission["podSetAssignments"][0]["flavors"] == {"cpu": "large", "memory": "large"}


@pytest.mark.parametrize(("policy", "reason", "message"), [
    ({"local": "Hold"}, "Inadmissible", "LocalQueue default is inactive"),
    ({"cluster": "Hold"}, "Inadmissible", "ClusterQueue cq-a is inactive"),
])
def test_a_stopped_queue_says_so(sb, policy, reason, message):
    """pkg/controller/core/workload_controller.go getQueueBlocker, as resolveLegacyUnadmittedQuotaReservedCondition
    writes it for a workload without quota (UnadmittedWorkloadsObservability off, its v0.19 default: reason
    Inadmissible). "LocalQueue default is stopped" is reconcileOnLocalQueueActiveState's message, for a workload
    that already holds quota."""
    flavors(sb, "h100")
    cluster_queue(sb, "cq-a", "team-a", [gpu_group(8)])
    if "local" in policy:
        sb.store.patch(sb.store.kind(KUEUE, "LocalQueue"), "team-a", "default", {"spec": {"stopPolicy": "Hold"}},
                       "merge")
    else:
        sb.store.patch(sb.store.kind(KUEUE, "ClusterQueue"), None, "cq-a", {"spec": {"stopPolicy": "Hold"}}, "merge")
    gpu_job(sb, "team-a", "held", 1)
    step(sb, 0)
    waiting = condition(workload_of(sb, "team-a", "held"), "QuotaReserved")
    assert (waiting["status"], waiting["reason"], waiting["message"]) == ("False", reason, message)


def test_without_kueue_installed_a_queued_job_is_left_alone(crds_dir, tmp_path):
    """With CRDs that lack Kueue's Workload, Kueue is not installed: nothing suspends or runs the job, and the
    simulator keeps stepping."""
    for path in Path(crds_dir).rglob("*.yaml"):
        if "workloads" not in path.name:
            (tmp_path / path.name).write_text(path.read_text())
    with Sandbox(crd_dirs=[tmp_path], simulate=True, tick=None) as sandbox:
        create(sandbox, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        gpu_job(sandbox, "team-a", "orphan", 1)
        step(sandbox, 0)
        assert get(sandbox, "batch/v1", "Job", "team-a", "orphan")["spec"].get("suspend") is not True
        assert sandbox.simulator.jobs() == []


# --- Volcano -----------------------------------------------------------------------------------------


def test_gang_with_min_available_below_replicas(sb):
    """PodGroup minMember is the job's minAvailable (pkg/controllers/job); gang (plugins/gang) lets the job run
    once that many pods are placed, the rest waiting for room."""
    volcano_setup(sb, {"qa": (8, 8), "qb": (8, 8)})
    job = vc_job(sb, "team-a", "elastic", queue="qa", workers=4, gpus=4)
    rt = sb.store.kind("batch.volcano.sh/v1alpha1", "Job")
    sb.store.delete(rt, "team-a", "elastic")
    job["metadata"] = {"name": "elastic", "namespace": "team-a"}
    job["spec"]["minAvailable"] = 2
    job.pop("status", None)
    create(sb, "batch.volcano.sh/v1alpha1", "Job", job)
    step(sb, 0)
    podgroup = podgroup_of(sb, "team-a", "elastic")
    assert podgroup["spec"]["minMember"] == 2 and podgroup["spec"]["minResources"]["nvidia.com/gpu"] == "8"
    assert podgroup["status"]["phase"] == "Inqueue"
    assert len(pods(sb, "team-a", "elastic")) == 2
    step(sb, 5)
    assert get(sb, "batch.volcano.sh/v1alpha1", "Job", "team-a", "elastic")["status"]["state"]["phase"] == "Running"


def preempt_configured(sb):
    conf = {"actions": "enqueue, allocate, preempt, backfill", "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}]}, {"plugins": [{"name": "proportion"}]}]}
    create(sb, "v1", "Namespace", {"metadata": {"name": "volcano-system"}})
    create(sb, "v1", "ConfigMap", {"metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                                   "data": {"volcano-scheduler.conf": yaml.safe_dump(conf)}})


@pytest.mark.parametrize(("configured", "min_available", "low_pods", "high"), [
    # The default configuration has no preempt action: high passes enqueue (proportion discounts low's pod above
    # its minimum) but allocate cannot place it, and the gang plugin says so.
    (False, 1, 2, "unschedulable"),
    # Gang: no victim at or below minAvailable; proportion refuses high at enqueue (nothing elastic to discount).
    (True, 2, 2, "not enqueued"),
    # With preempt configured, low's pod above its minAvailable goes and high runs.
    (True, 1, 1, "running"),
])
def test_volcano_preempts_only_when_configured_and_never_below_the_gang(sb, configured, min_available, low_pods,
                                                                         high):
    """installer/helm/chart/volcano/config/volcano-scheduler.conf (no preempt); gang.go preemptableFn and
    OnSessionClose; proportion.go AddJobEnqueueableFn (allocated + inqueue - elastic)."""
    volcano_setup(sb, {"qa": (8, 8), "qb": (8, 8)})
    if configured:
        preempt_configured(sb)
    low = vc_job(sb, "team-a", "low", queue="qa", workers=2, gpus=4, priority="low")
    rt = sb.store.kind("batch.volcano.sh/v1alpha1", "Job")
    sb.store.delete(rt, "team-a", "low")
    low["metadata"] = {"name": "low", "namespace": "team-a"}
    low["spec"]["minAvailable"] = min_available
    low.pop("status", None)
    create(sb, "batch.volcano.sh/v1alpha1", "Job", low)
    step(sb, 0)
    vc_job(sb, "team-a", "high", queue="qa", workers=1, gpus=4, priority="high")
    step(sb, 1)
    assert len(pods(sb, "team-a", "low")) == low_pods
    assert len(pods(sb, "team-a", "high")) == (1 if high == "running" else 0)
    podgroup = podgroup_of(sb, "team-a", "high")
    assert podgroup["status"]["phase"] == ("Pending" if high == "not enqueued" else "Inqueue")
    unschedulable = condition(podgroup, "Unschedulable")
    if high == "unschedulable":
        assert (unschedulable["reason"], unschedulable["message"]) == (
            "NotEnoughResources", "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, "
            "1 minAvailable; Pending: 1 Unschedulable")
    else:
        assert unschedulable == {}


def test_the_default_queue_exists(sb):
    """pkg/scheduler/cache/cache.go newDefaultAndRootQueue: the scheduler creates `root` and `default`."""
    vc_job(sb, "team-a", "anywhere", queue="", workers=1, gpus=0)
    step(sb, 0)
    assert {q["metadata"]["name"] for q in items(sb, VOLCANO, "Queue")} >= {"root", "default"}
    assert podgroup_of(sb, "team-a", "anywhere")["spec"]["queue"] == "default"


def test_volcano_reclaims_from_a_queue_above_its_deserved_share_when_configured(sb):
    """docs/user-guide/how_to_use_capacity_plugin.md's configuration (capacity with hierarchy, the reclaim action);
    actions/reclaim and capacity.go's reclaimableFn: a queue under its deserved share takes back from one above
    it. The victim, left below its gang minimum, is evicted whole: its job controller restarts it (retryCount, no
    reason), and only the scheduler's Events say it was reclaimed (cache.go Evict), without naming the job."""
    _reclaiming(sb)
    vc_job(sb, "team-a", "borrower", queue="qa", workers=2, gpus=8, priority="high")
    step(sb, 0)
    assert len(pods(sb, "team-a", "borrower")) == 2
    vc_job(sb, "team-b", "owner", queue="qb", workers=1, gpus=8, priority="low")
    step(sb, 1)
    status = get(sb, "batch.volcano.sh/v1alpha1", "Job", "team-a", "borrower")["status"]
    assert (status["state"]["phase"], status["retryCount"]) == ("Pending", 1)
    assert "reason" not in status["state"] and "message" not in status["state"]
    said = sorted((e["involvedObject"]["kind"], e["type"], e["reason"], e["message"])
                  for e in items(sb, "v1", "Event", "team-a") if e["reason"] == "Evict")
    assert said == [("Pod", "Warning", "Evict", "Pod is evicted, because of reclaim")] * 2 + [
        ("PodGroup", "Normal", "Evict", "reclaim")]
    assert pods(sb, "team-a", "borrower") == [] and len(pods(sb, "team-b", "owner")) == 1


def _reclaiming(sb, qb_capability=8):
    """Queues qa (deserved and guaranteed 8, capability 16) and qb (deserved 8, guaranteeing none) on 16 GPUs, with
    the capacity plugin and the reclaim action as the portal configures them. qb guarantees nothing so that qa may
    borrow its 8: the capacity plugin caps qa at the cluster less the other queues' guarantees (realCapability)."""
    volcano_setup(sb, {"qa": (8, 16), "qb": (8, qb_capability, 0)})
    conf = {"actions": "enqueue, allocate, backfill, reclaim", "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
        {"plugins": [{"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
                     {"name": "capacity", "enableHierarchy": True}]}]}
    create(sb, "v1", "Namespace", {"metadata": {"name": "volcano-system"}})
    create(sb, "v1", "ConfigMap", {"metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                                   "data": {"volcano-scheduler.conf": yaml.safe_dump(conf)}})


def test_volcano_reclaims_no_pod_that_would_take_its_queue_below_its_guarantee(sb):
    """capacity.go reclaimableFn (checkGuaranteeConstraint): a pod goes only if its queue keeps its guarantee
    without it. qa holds 12 of its deserved 8 in one pod; taking it would leave qa 0: qb's job waits instead (the
    queue taken below its guarantee would take the capacity back, and so on: a reclaim loop)."""
    _reclaiming(sb)
    vc_job(sb, "team-a", "big", queue="qa", gpus=12)
    vc_job(sb, "team-b", "small", queue="qb", gpus=4)
    step(sb, 0)
    vc_job(sb, "team-b", "owner", queue="qb", gpus=4)
    for t in (1, 2, 3):
        step(sb, t)
    assert len(pods(sb, "team-a", "big")) == 1 and pods(sb, "team-b", "owner") == []
    assert podgroup_of(sb, "team-b", "owner")["status"]["phase"] == "Inqueue"


def test_volcano_reclaims_only_for_a_job_its_queue_has_deserved_room_for(sb):
    """capacity.go preemptiveFn: a queue reclaims for a job only while its allocation plus the job stays within its
    deserved share (within its capability of 16, past enqueue). qb holds 4 of its 8: a job of 8 would take it to 12
    and reclaims nothing; one of 4 reclaims qa's newest pod (qa keeps its guarantee of 8 without it)."""
    _reclaiming(sb, qb_capability=16)
    for t, name in enumerate(("a1", "a2", "a3")):
        vc_job(sb, "team-a", name, queue="qa", gpus=4)
        step(sb, t)
    vc_job(sb, "team-b", "b1", queue="qb", gpus=4)
    step(sb, 3)
    vc_job(sb, "team-b", "wide", queue="qb", gpus=8)
    step(sb, 4)
    assert [len(pods(sb, "team-a", name)) for name in ("a1", "a2", "a3")] == [1, 1, 1]
    assert pods(sb, "team-b", "wide") == []
    vc_job(sb, "team-b", "narrow", queue="qb", gpus=4)
    step(sb, 5)
    assert [len(pods(sb, "team-a", name)) for name in ("a1", "a2", "a3")] == [1, 1, 0]
    assert len(pods(sb, "team-b", "narrow")) == 1 and pods(sb, "team-b", "wide") == []


def test_volcano_capacity_plugin_allocates_the_queue_with_the_lowest_share_first(sb):
    """capacity.go QueueOrderFn as actions/allocate pops queues: the queue with the lowest allocated / deserved goes
    first, whatever the jobs' submission order. qa holds its deserved 8, qb half of its 8: of two jobs of 4 for the
    last 4 GPUs, qb's (submitted second) gets them; qa's waits (past its deserved share it may not reclaim)."""
    _reclaiming(sb)
    vc_job(sb, "team-a", "a1", queue="qa", gpus=8)
    vc_job(sb, "team-b", "b1", queue="qb", gpus=4)
    step(sb, 0)
    vc_job(sb, "team-a", "a2", queue="qa", gpus=4)
    vc_job(sb, "team-b", "b2", queue="qb", gpus=4)
    step(sb, 1)
    assert pods(sb, "team-a", "a2") == [] and len(pods(sb, "team-b", "b2")) == 1


@pytest.mark.parametrize(("used_on_first", "expected"), [
    (0, "spot"),  # the first flavor fits: the search stops there
    (4, "spot"),  # the first flavor fits by borrowing: whenCanBorrow MayStopSearch stops there too
    (8, "reserved"),  # the first flavor would need preemption: whenCanPreempt TryNextFlavor moves on
])
def test_flavor_fungibility_defaults(sb, used_on_first, expected):
    """flavorassigner.go findFlavorForPodSets/shouldTryNextFlavor with the API's defaults (clusterqueue_types.go:
    whenCanBorrow MayStopSearch, whenCanPreempt TryNextFlavor)."""
    flavors(sb, "spot", "reserved")
    priorities(sb, low=100, high=1000)
    group = {"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "4"}]},
        {"name": "reserved", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}
    cluster_queue(sb, "cq-a", "team-a", [group], cohort="pool")
    lender = {"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}
    cluster_queue(sb, "cq-b", "team-b", [lender], cohort="pool")
    if used_on_first:
        gpu_job(sb, "team-a", "earlier", used_on_first, "low")
        step(sb, 0)
    gpu_job(sb, "team-a", "next", 4, "high")
    step(sb, 1)
    assert kueue_state(sb, "team-a", "next") == "admitted"
    admission = workload_of(sb, "team-a", "next")["status"]["admission"]
    assert admission["podSetAssignments"][0]["flavors"] == {"nvidia.com/gpu": expected}
    if used_on_first:
        assert kueue_state(sb, "team-a", "earlier") == "admitted"  # nobody was preempted


def test_volcano_hierarchical_queues_bound_a_child_by_its_parent(sb):
    """capacity plugin with enableHierarchy (docs/user-guide/how_to_use_capacity_plugin.md): a job enqueues only
    within the capability of its queue and of every ancestor."""
    create(sb, "v1", "Namespace", {"metadata": {"name": "volcano-system"}})
    conf = {"actions": "enqueue, allocate, backfill", "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}]},
        {"plugins": [{"name": "capacity", "enableHierarchy": True}]}]}
    create(sb, "v1", "ConfigMap", {"metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                                   "data": {"volcano-scheduler.conf": yaml.safe_dump(conf)}})
    gpus = lambda n: {"nvidia.com/gpu": str(n)}  # noqa: E731
    create(sb, VOLCANO, "Queue", {"metadata": {"name": "dept"}, "spec": {"capability": gpus(8), "deserved": gpus(8)}})
    for name in ("qa", "qb"):
        create(sb, VOLCANO, "Queue", {"metadata": {"name": name}, "spec": {
            "parent": "dept", "capability": gpus(8), "deserved": gpus(4)}})
    vc_job(sb, "team-a", "first", queue="qa", workers=1, gpus=6)
    step(sb, 0)
    vc_job(sb, "team-b", "second", queue="qb", workers=1, gpus=4)  # fits qb's 8, not dept's 8 - 6
    step(sb, 1)
    assert podgroup_of(sb, "team-a", "first")["status"]["phase"] == "Inqueue"
    assert podgroup_of(sb, "team-b", "second")["status"]["phase"] == "Pending"
    refusals = [e["message"] for e in items(sb, "v1", "Event", "team-b") if e["type"] == "Normal"]
    assert refusals == ["queue resource quota insufficient: insufficient nvidia.com/gpu"]


@pytest.mark.parametrize("hierarchy", [False, True])
def test_volcano_capacity_plugin_keeps_the_other_queues_guarantees_from_a_borrower(sb, hierarchy):
    """capacity.go realCapability (buildQueueAttrs; checkHierarchicalQueue with enableHierarchy): a queue may hold
    at most the cluster less the other queues' guarantees, whatever its capability. qa (guarantee 8, capability 16)
    and qb (guarantee 8) share 16 GPUs: qa's job of 12 is refused at enqueue, one of 8 runs."""
    volcano_setup(sb, {"qa": (8, 16), "qb": (8, 8)})
    create(sb, "v1", "Namespace", {"metadata": {"name": "volcano-system"}})
    conf = {"actions": "enqueue, allocate, backfill", "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}]},
        {"plugins": [{"name": "capacity", "enableHierarchy": hierarchy}]}]}
    create(sb, "v1", "ConfigMap", {"metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                                   "data": {"volcano-scheduler.conf": yaml.safe_dump(conf)}})
    vc_job(sb, "team-a", "wide", queue="qa", workers=1, gpus=12)
    vc_job(sb, "team-a", "own", queue="qa", workers=1, gpus=8)
    step(sb, 0)
    assert podgroup_of(sb, "team-a", "wide")["status"]["phase"] == "Pending"
    assert len(pods(sb, "team-a", "own")) == 1
    refusals = {e["message"] for e in items(sb, "v1", "Event", "team-a") if e["type"] == "Normal"}
    assert refusals == {"queue resource quota insufficient: insufficient nvidia.com/gpu"}


def test_volcano_counts_a_pod_bound_by_hand_on_its_node(sb):
    """The scheduler's cache counts every pod on a node, not only its own jobs': with one of two 8-GPU nodes held
    by a pod bound there by hand, a second 8-GPU job waits for room (the gang's NotEnoughResources)."""
    from sandbox.nodes import add_node

    volcano_setup(sb, {"qa": (16, 16)})
    for name in ("n0", "n1"):
        add_node(sb.store, name, {"kubernetes.io/hostname": name},
                 {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})
    create(sb, "v1", "Pod", {"metadata": {"name": "outside", "namespace": "team-b"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "main", "image": "busybox",
                                          "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}})
    vc_job(sb, "team-a", "first", queue="qa", workers=1, gpus=8)
    vc_job(sb, "team-a", "second", queue="qa", workers=1, gpus=8)
    step(sb, 0)
    assert [len(pods(sb, "team-a", name)) for name in ("first", "second")] == [1, 0]
    assert condition(podgroup_of(sb, "team-a", "second"), "Unschedulable")["reason"] == "NotEnoughResources"


def test_volcano_reclaims_on_the_first_node_that_has_a_victim(sb):
    """actions/reclaim reclaimForTask asks the plugins about one node's tasks at a time and evicts on the first node
    holding a task it may take (upstream's first node varies; the simulator's is the first): qa's older job on n0
    goes, not its newest, which the capacity plugin would choose from all of qa's tasks at once."""
    from sandbox.nodes import add_node

    _reclaiming(sb)
    for name in ("n0", "n1"):
        add_node(sb.store, name, {"kubernetes.io/hostname": name},
                 {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})
    vc_job(sb, "team-a", "older", queue="qa", workers=1, gpus=8)
    step(sb, 0)
    vc_job(sb, "team-a", "newer", queue="qa", workers=1, gpus=8)
    step(sb, 1)
    assert [pod["spec"]["nodeName"] for name in ("older", "newer") for pod in pods(sb, "team-a", name)] == ["n0", "n1"]
    vc_job(sb, "team-b", "owner", queue="qb", workers=1, gpus=8)
    step(sb, 2)
    assert [len(pods(sb, "team-a", name)) for name in ("older", "newer")] == [0, 1]
    assert len(pods(sb, "team-b", "owner")) == 1
