"""The sandbox's job simulation: Kueue and Volcano admission (quota, borrowing, gang, priority, preemption) as
tables of cases, then each kind's life from creation to the end, driven by an explicit clock."""

import json
import re
import urllib.error
import urllib.request

import pytest

from sandbox import Sandbox

KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
T0 = 1_800_000_000.0


@pytest.fixture
def sb():
    """A simulating sandbox whose clock the test drives (no background ticker); jobs run 100 s after a 5 s start."""
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sandbox:
        for name in ("team-a", "team-b"):
            create(sandbox, "v1", "Namespace", {"metadata": {"name": name}})
        yield sandbox


def create(sb, api_version, kind, obj):
    obj = {"apiVersion": api_version, "kind": kind, **obj}
    return sb.store.create(sb.store.kind(api_version, kind), obj)


def get(sb, api_version, kind, namespace, name):
    return sb.store.get(sb.store.kind(api_version, kind), namespace, name)


def items(sb, api_version, kind, namespace=None):
    return sb.store.list(sb.store.kind(api_version, kind), namespace)["items"]


def step(sb, seconds):
    sb.simulator.step(T0 + seconds)


# --- builders ------------------------------------------------------------------------------------------------


def pod_template(gpus, priority_class="", node_selector=None):
    resources = {"requests": {"cpu": "1", "memory": "1Gi"},
                 "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}}
    spec = {"restartPolicy": "Never",
            "containers": [{"name": "worker", "image": "ghcr.io/acme/train:1", "resources": resources}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"labels": {"gpu-portal.io/job": "7"}}, "spec": spec}


def kueue_job(sb, namespace, name, *, workers=1, gpus=8, priority="", annotations=None, deadline=None):
    labels = {"kueue.x-k8s.io/queue-name": "default", "gpu-portal.io/job": "7"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    spec = {"parallelism": workers, "completions": workers, "completionMode": "Indexed", "backoffLimit": 0,
            "template": pod_template(gpus)}
    if deadline:
        spec["activeDeadlineSeconds"] = deadline
    return create(sb, "batch/v1", "Job", {"metadata": {"name": name, "namespace": namespace, "labels": labels,
                                                       "annotations": annotations or {}}, "spec": spec})


def ray_job(sb, namespace, name, *, workers=1, gpus=4):
    head = pod_template(0)
    return create(sb, "ray.io/v1", "RayJob", {
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"entrypoint": "python run.py", "shutdownAfterJobFinishes": True, "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": head},
            "workerGroupSpecs": [{"groupName": "gpu-workers", "replicas": workers, "minReplicas": workers,
                                  "maxReplicas": workers, "rayStartParams": {}, "template": pod_template(gpus)}]}}})


def vc_job(sb, namespace, name, *, queue, workers=1, gpus=8, priority="", annotations=None):
    tasks = [{"name": "master", "replicas": 1, "template": pod_template(gpus)}]
    if workers > 1:
        tasks.append({"name": "worker", "replicas": workers - 1, "template": pod_template(gpus)})
    spec = {"schedulerName": "volcano", "queue": queue, "minAvailable": workers, "tasks": tasks}
    if priority:
        spec["priorityClassName"] = priority
    return create(sb, "batch.volcano.sh/v1alpha1", "Job", {
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}}, "spec": spec})


def kueue_setup(sb, queues, preemption=None):
    """`queues`: {cluster queue: (namespace, nominal GPUs, borrowingLimit or None, cohort)}."""
    create(sb, KUEUE, "ResourceFlavor", {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu": "h100"}}})
    create(sb, KUEUE, "ResourceFlavor", {"metadata": {"name": "cpu"}, "spec": {}})
    create(sb, KUEUE, "WorkloadPriorityClass", {"metadata": {"name": "low"}, "value": 100})
    create(sb, KUEUE, "WorkloadPriorityClass", {"metadata": {"name": "high"}, "value": 1000})
    for name, (namespace, nominal, limit, cohort) in queues.items():
        resource = {"name": "nvidia.com/gpu", "nominalQuota": str(nominal)}
        if limit is not None:
            resource["borrowingLimit"] = str(limit)
        cpu = [{"name": "cpu", "nominalQuota": "1000"}, {"name": "memory", "nominalQuota": "1000Gi"}]
        spec = {"namespaceSelector": {}, "resourceGroups": [
            {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "cpu", "resources": cpu}]},
            {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [resource]}]}],
            "preemption": preemption or {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}}
        if cohort:
            spec["cohortName"] = cohort
        create(sb, KUEUE, "ClusterQueue", {"metadata": {"name": name}, "spec": spec})
        create(sb, KUEUE, "LocalQueue", {"metadata": {"name": "default", "namespace": namespace},
                                         "spec": {"clusterQueue": name}})


def volcano_setup(sb, queues):
    """`queues`: {queue: (deserved GPUs, capability GPUs[, guaranteed GPUs, else the deserved])}; PriorityClasses
    low, high and never (no preemption)."""
    for name, value, policy in (("low", 100, "PreemptLowerPriority"), ("high", 1000, "PreemptLowerPriority"),
                                ("never", 1000, "Never")):
        create(sb, "scheduling.k8s.io/v1", "PriorityClass", {"metadata": {"name": name}, "value": value,
                                                              "preemptionPolicy": policy})
    for name, (deserved, capability, *guaranteed) in queues.items():
        gpus = {"nvidia.com/gpu": str(deserved)}
        guarantee = {"nvidia.com/gpu": str(guaranteed[0])} if guaranteed else gpus
        create(sb, VOLCANO, "Queue", {"metadata": {"name": name}, "spec": {
            "weight": 1, "reclaimable": True, "capability": {"nvidia.com/gpu": str(capability)},
            "deserved": gpus, "guarantee": {"resource": guarantee}}})


# --- observing -----------------------------------------------------------------------------------------------


def condition(obj, kind):
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def workload_of(sb, namespace, name):
    for workload in items(sb, KUEUE, "Workload", namespace):
        if workload["metadata"]["ownerReferences"][0]["name"] == name:
            return workload
    return None


def kueue_state(sb, namespace, name):
    workload = workload_of(sb, namespace, name)
    if condition(workload, "Evicted").get("status") == "True":
        return "preempted"
    if condition(workload, "Admitted").get("status") == "True":
        return "admitted"
    return "pending" if condition(workload, "QuotaReserved").get("status") == "False" else "new"


def podgroup_of(sb, namespace, name):
    return next(pg for pg in items(sb, VOLCANO, "PodGroup", namespace)
                if pg["metadata"]["ownerReferences"][0]["name"] == name)


def volcano_state(sb, namespace, name):
    status = get(sb, "batch.volcano.sh/v1alpha1", "Job", namespace, name)["status"]
    group_phase = podgroup_of(sb, namespace, name)["status"]["phase"]
    if status.get("retryCount") and status["state"]["phase"] == "Pending" and group_phase == "Pending":
        return "preempted"  # restarted by its job controller after an eviction, waiting again
    return {"Pending": "pending", "Inqueue": "admitted", "Running": "admitted"}[group_phase]


def pods(sb, namespace, job_name=None):
    found = items(sb, "v1", "Pod", namespace)
    return [p for p in found if job_name is None or p["metadata"]["ownerReferences"][0]["name"] == job_name]


# --- Kueue admission -----------------------------------------------------------------------------------------

SOLO = {"cq-a": ("team-a", 8, None, "")}
PAIR = {"cq-a": ("team-a", 8, 8, "pool"), "cq-b": ("team-b", 8, 8, "pool")}
PREEMPT = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}

# (queues, preemption policy, jobs as (namespace, name, workers, GPUs per worker, priority) or "step", expected)
KUEUE_CASES = {
    "nominal quota admits what fits, the rest waits": (
        SOLO, None, [("team-a", "j1", 1, 8, ""), ("team-a", "j2", 1, 8, ""), "step"],
        {"j1": "admitted", "j2": "pending"}),
    "borrowing from the cohort above nominal": (
        PAIR, None, [("team-a", "j1", 2, 8, ""), "step"], {"j1": "admitted"}),
    "borrowing stops at borrowingLimit": (
        {"cq-a": ("team-a", 8, 4, "pool"), "cq-b": ("team-b", 8, 8, "pool")}, None,
        [("team-a", "j1", 2, 8, ""), "step"], {"j1": "pending"}),
    "only what the cohort leaves unused can be borrowed": (
        PAIR, None, [("team-b", "b1", 1, 8, ""), "step", ("team-a", "a1", 2, 8, ""), "step"],
        {"b1": "admitted", "a1": "pending"}),
    "gang: all workers or none": (
        SOLO, None, [("team-a", "j1", 3, 2, ""), "step", ("team-a", "j2", 2, 2, ""), "step"],
        {"j1": "admitted", "j2": "pending"}),
    "higher priority first": (
        SOLO, None, [("team-a", "low", 1, 8, "low"), ("team-a", "high", 1, 8, "high"), "step"],
        {"low": "pending", "high": "admitted"}),
    "equal priority: first come first served": (
        SOLO, None, [("team-a", "first", 1, 8, "low"), ("team-a", "second", 1, 8, "low"), "step"],
        {"first": "admitted", "second": "pending"}),
    # The preemptor is admitted in the cycle after the one that evicts its victims.
    "preemption of lower priority within the ClusterQueue": (
        {"cq-a": ("team-a", 8, None, "")}, PREEMPT,
        [("team-a", "low", 1, 8, "low"), "step", ("team-a", "high", 1, 8, "high"), "step", "step"],
        {"low": "preempted", "high": "admitted"}),
    "no preemption when the policy is Never": (
        SOLO, None, [("team-a", "low", 1, 8, "low"), "step", ("team-a", "high", 1, 8, "high"), "step"],
        {"low": "admitted", "high": "pending"}),
    "no preemption of equal priority": (
        {"cq-a": ("team-a", 8, None, "")}, PREEMPT,
        [("team-a", "one", 1, 8, "low"), "step", ("team-a", "two", 1, 8, "low"), "step"],
        {"one": "admitted", "two": "pending"}),
    "reclaim within the cohort from a borrower": (
        PAIR, PREEMPT,
        [("team-b", "borrower", 2, 8, "high"), "step", ("team-a", "owner", 1, 8, "low"), "step", "step"],
        {"borrower": "preempted", "owner": "admitted"}),
}


@pytest.mark.parametrize(("queues", "preemption", "jobs", "expected"), KUEUE_CASES.values(), ids=KUEUE_CASES.keys())
def test_kueue_admission(sb, queues, preemption, jobs, expected):
    kueue_setup(sb, queues, preemption)
    clock = 0
    for entry in jobs:
        if entry == "step":
            clock += 1
            step(sb, clock)
        else:
            namespace, name, workers, gpus, priority = entry
            kueue_job(sb, namespace, name, workers=workers, gpus=gpus, priority=priority)
    states = {name: kueue_state(sb, ns, name) for ns in ("team-a", "team-b")
              for name in expected if workload_of(sb, ns, name)}
    assert states == expected
    for name, state in states.items():
        if state == "preempted":
            workload = next(workload_of(sb, ns, name) for ns in ("team-a", "team-b") if workload_of(sb, ns, name))
            evicted = condition(workload, "Evicted")
            assert evicted["message"].startswith("Preempted to accommodate a workload (UID: ")
            # preemptionMessage (pkg/scheduler/preemption/preemption.go, Kueue) names both queues' paths.
            assert re.search(r"\) due to (prioritization in the ClusterQueue|reclamation within the cohort); "
                             r"preemptor path: /[\w/-]+; preemptee path: /[\w/-]+$", evicted["message"])
    for ns in ("team-a", "team-b"):
        for name in expected:
            if workload_of(sb, ns, name):
                admitted = states[name] == "admitted"
                job = get(sb, "batch/v1", "Job", ns, name)
                assert job["spec"]["suspend"] is (not admitted)
                assert len(pods(sb, ns, name)) == (job["spec"]["parallelism"] if admitted else 0)


def test_kueue_messages_are_kueues_own_words(sb):
    kueue_setup(sb, {"cq-a": ("team-a", 8, 4, "pool"), "cq-b": ("team-b", 8, 8, "pool")})
    kueue_job(sb, "team-b", "b1", gpus=8)
    step(sb, 1)
    kueue_job(sb, "team-a", "a1", workers=2, gpus=8)
    kueue_job(sb, "team-a", "a2", workers=1, gpus=8)
    kueue_job(sb, "team-a", "a3", workers=1, gpus=8)
    step(sb, 2)
    assert condition(workload_of(sb, "team-a", "a1"), "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
        "previously considered podsets requests (0) + current podset request (16) > maximum capacity (12)")
    assert kueue_state(sb, "team-a", "a2") == "admitted"
    waiting = condition(workload_of(sb, "team-a", "a3"), "QuotaReserved")
    assert (waiting["status"], waiting["reason"]) == ("False", "Pending")
    assert waiting["message"] == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                                  "nvidia.com/gpu in flavor h100, 8 more needed")


def test_kueue_workload_is_named_owned_and_admitted_as_kueue_does(sb):
    kueue_setup(sb, SOLO)
    job = kueue_job(sb, "team-a", "train", workers=2, gpus=4, priority="high")
    assert get(sb, "batch/v1", "Job", "team-a", "train")["spec"]["suspend"] is True  # the webhook's doing
    step(sb, 0)
    workload = workload_of(sb, "team-a", "train")
    assert workload["metadata"]["name"].startswith("job-train-") and len(workload["metadata"]["name"]) == 15
    assert workload["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert workload["spec"]["priority"] == 1000
    assert workload["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                    "name": "high"}
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("main", 2)]
    admission = workload["status"]["admission"]
    assert admission["clusterQueue"] == "cq-a"
    assert admission["podSetAssignments"][0]["flavors"] == {"cpu": "cpu", "memory": "cpu", "nvidia.com/gpu": "h100"}
    assert admission["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"] == "8"


@pytest.mark.parametrize(
    ("selector", "admitted"),
    [({}, True), ({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}, True),
     ({"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}, False),
     ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}]}, True),
     ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, False), (None, False)],
)
def test_kueue_cluster_queue_namespace_selector(sb, selector, admitted):
    kueue_setup(sb, SOLO)
    rt = sb.store.kind(KUEUE, "ClusterQueue")
    sb.store.patch(rt, None, "cq-a", {"spec": {"namespaceSelector": selector}}, "merge")
    kueue_job(sb, "team-a", "j1", gpus=1)
    step(sb, 0)
    assert kueue_state(sb, "team-a", "j1") == ("admitted" if admitted else "pending")
    if not admitted:
        assert condition(workload_of(sb, "team-a", "j1"), "QuotaReserved")["message"] == (
            "workload namespace doesn't match ClusterQueue selector")


def test_kueue_flavor_must_match_the_node_selector(sb):
    kueue_setup(sb, SOLO)
    job = kueue_job(sb, "team-a", "elsewhere", gpus=1)
    template = pod_template(1, node_selector={"gpu": "a100"})
    sb.store.delete(sb.store.kind("batch/v1", "Job"), "team-a", "elsewhere")
    job["metadata"] = {k: job["metadata"][k] for k in ("name", "namespace", "labels")}
    job["spec"]["template"] = template
    job.pop("status", None)
    create(sb, "batch/v1", "Job", job)
    step(sb, 0)
    assert "flavor h100 doesn't match node affinity" in condition(
        workload_of(sb, "team-a", "elsewhere"), "QuotaReserved")["message"]


# --- Volcano admission ---------------------------------------------------------------------------------------

# (queues {name: (deserved, capability)}, jobs as (queue, name, workers, GPUs per worker, priority class), expected)
VOLCANO_CASES = {
    "capability admits what fits, the rest waits": (
        {"qa": (8, 8), "qb": (8, 8)}, [("qa", "j1", 1, 8, ""), ("qa", "j2", 1, 8, ""), "step"],
        {"j1": "admitted", "j2": "pending"}),
    # proportion's real capability: the cluster less the other queues' guarantees (plugins/proportion).
    "not above what the other queues are guaranteed": (
        {"qa": (8, 16), "qb": (8, 8)}, [("qa", "j1", 2, 8, ""), "step"], {"j1": "pending"}),
    "the cluster's capacity bounds borrowing": (
        {"qa": (8, 16), "qb": (8, 8)}, [("qb", "b1", 1, 4, ""), "step", ("qa", "a1", 2, 8, ""), "step"],
        {"b1": "admitted", "a1": "pending"}),
    "gang: minMember or nothing": (
        {"qa": (8, 8), "qb": (8, 8)}, [("qa", "j1", 3, 2, ""), "step", ("qa", "j2", 2, 2, ""), "step"],
        {"j1": "admitted", "j2": "pending"}),
    "higher priority first": (
        {"qa": (8, 8), "qb": (8, 8)}, [("qa", "low", 1, 8, "low"), ("qa", "high", 1, 8, "high"), "step"],
        {"low": "pending", "high": "admitted"}),
    # Upstream's default volcano-scheduler.conf has no preempt and no reclaim action.
    "no preemption of lower priority by default": (
        {"qa": (8, 8), "qb": (8, 8)}, [("qa", "low", 1, 8, "low"), "step", ("qa", "high", 1, 8, "high"), "step"],
        {"low": "admitted", "high": "pending"}),
}


@pytest.mark.parametrize(("queues", "jobs", "expected"), VOLCANO_CASES.values(), ids=VOLCANO_CASES.keys())
def test_volcano_admission(sb, queues, jobs, expected):
    volcano_setup(sb, queues)
    clock = 0
    for entry in jobs:
        if entry == "step":
            clock += 1
            step(sb, clock)
        else:
            queue, name, workers, gpus, priority = entry
            vc_job(sb, "team-a", name, queue=queue, workers=workers, gpus=gpus, priority=priority)
    assert {name: volcano_state(sb, "team-a", name) for name in expected} == expected
    for name, state in expected.items():
        workers = get(sb, "batch.volcano.sh/v1alpha1", "Job", "team-a", name)["spec"]["minAvailable"]
        assert len(pods(sb, "team-a", name)) == (workers if state == "admitted" else 0)


def test_volcano_podgroup_and_why_it_is_not_enqueued(sb):
    """A PodGroup the enqueue action refuses stays Pending with no condition; proportion says why in a Normal Event
    (plugins/proportion/proportion.go AddJobEnqueueableFn, Volcano), and the scheduler's cache adds a
    Warning one, same reason, for a PodGroup still Pending (pkg/scheduler/cache/cache.go RecordJobStatusEvent)."""
    volcano_setup(sb, {"qa": (8, 8), "qb": (8, 8)})
    job = vc_job(sb, "team-a", "big", queue="qa", workers=2, gpus=8)
    step(sb, 0)
    podgroup = podgroup_of(sb, "team-a", "big")
    assert podgroup["metadata"]["name"] == f"big-{job['metadata']['uid']}"
    assert (podgroup["spec"]["minMember"], podgroup["spec"]["queue"]) == (2, "qa")
    assert podgroup["spec"]["minResources"]["nvidia.com/gpu"] == "16"
    assert podgroup["status"] == {"phase": "Pending"}
    events = [e for e in items(sb, "v1", "Event", "team-a")
              if e["involvedObject"]["name"] == podgroup["metadata"]["name"]]
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [
        ("Normal", "Unschedulable", "queue resource quota insufficient: insufficient nvidia.com/gpu"),
        ("Warning", "Unschedulable", "0/0 tasks in gang unschedulable: pod group is not ready, 2 minAvailable")]
    step(sb, 1)
    assert len(items(sb, "v1", "Event", "team-a")) == 2  # written once, not every step


# --- lives of jobs -------------------------------------------------------------------------------------------


def test_kueue_batch_job_runs_for_its_duration_then_completes_and_frees_quota(sb):
    kueue_setup(sb, SOLO)
    kueue_job(sb, "team-a", "first", workers=2, gpus=4)
    kueue_job(sb, "team-a", "second", workers=2, gpus=4)
    step(sb, 0)
    job = get(sb, "batch/v1", "Job", "team-a", "first")
    assert job["spec"]["suspend"] is False
    assert (job["status"]["active"], job["status"]["ready"]) == (2, 0)
    assert {p["status"]["phase"] for p in pods(sb, "team-a", "first")} == {"Pending"}
    step(sb, 5)
    assert get(sb, "batch/v1", "Job", "team-a", "first")["status"]["ready"] == 2
    running = pods(sb, "team-a", "first")
    assert {p["status"]["phase"] for p in running} == {"Running"}
    assert {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in running} == {"0", "1"}
    assert all(p["metadata"]["labels"]["gpu-portal.io/job"] == "7" for p in running)
    assert "started Job first" in sb.store.get_log("team-a", running[0]["metadata"]["name"])
    assert kueue_state(sb, "team-a", "second") == "pending"
    step(sb, 104)
    assert "Complete" not in {c["type"] for c in get(sb, "batch/v1", "Job", "team-a", "first")["status"].get(
        "conditions", [])}
    step(sb, 105)
    done = get(sb, "batch/v1", "Job", "team-a", "first")["status"]
    assert condition({"status": done}, "Complete")["status"] == "True"
    assert (done["succeeded"], done["active"], done["completionTime"]) == (2, 0, "2027-01-15T08:01:45Z")
    assert {p["status"]["phase"] for p in pods(sb, "team-a", "first")} == {"Succeeded"}
    assert condition(workload_of(sb, "team-a", "first"), "Finished")["reason"] == "Succeeded"
    step(sb, 106)
    assert kueue_state(sb, "team-a", "second") == "admitted"


@pytest.mark.parametrize(
    ("annotations", "deadline", "reason"),
    [
        ({"sandbox.gpu-portal.io/outcome": "fail"}, None, "BackoffLimitExceeded"),
        ({"sandbox.gpu-portal.io/duration-seconds": "500"}, 60, "DeadlineExceeded"),
    ],
)
def test_kueue_batch_job_fails_on_request_or_at_its_deadline(sb, annotations, deadline, reason):
    kueue_setup(sb, SOLO)
    kueue_job(sb, "team-a", "doomed", annotations=annotations, deadline=deadline)
    step(sb, 0)
    step(sb, 5)
    step(sb, 110)
    status = get(sb, "batch/v1", "Job", "team-a", "doomed")["status"]
    assert condition({"status": status}, "Failed")["reason"] == reason
    assert {p["status"]["phase"] for p in pods(sb, "team-a", "doomed")} == {"Failed"}
    assert condition(workload_of(sb, "team-a", "doomed"), "Finished")["reason"] == "Failed"


def test_requested_preemption_evicts_and_holds_the_job_back(sb):
    kueue_setup(sb, SOLO)
    kueue_job(sb, "team-a", "victim", annotations={"sandbox.gpu-portal.io/outcome": "preempt",
                                                   "sandbox.gpu-portal.io/duration-seconds": "10"})
    step(sb, 0)
    step(sb, 5)
    step(sb, 15)
    workload = workload_of(sb, "team-a", "victim")
    evicted = condition(workload, "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert get(sb, "batch/v1", "Job", "team-a", "victim")["spec"]["suspend"] is True
    assert pods(sb, "team-a", "victim") == []
    step(sb, 30)
    assert kueue_state(sb, "team-a", "victim") == "preempted"  # requeued, but not at once


def test_ray_job_under_kueue(sb):
    kueue_setup(sb, SOLO)
    ray_job(sb, "team-a", "tune", workers=2, gpus=4)
    assert get(sb, "ray.io/v1", "RayJob", "team-a", "tune")["spec"]["suspend"] is True
    step(sb, 0)
    workload = workload_of(sb, "team-a", "tune")
    assert workload["metadata"]["name"].startswith("rayjob-tune-")
    # KubeRay's submitter Job (K8sJobMode, the default) is a pod set of its own (rayjob_controller.go).
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("head", 1), ("gpu-workers", 2),
                                                                              ("submitter", 1)]
    status = get(sb, "ray.io/v1", "RayJob", "team-a", "tune")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Initializing", "")
    assert len(pods(sb, "team-a", "tune")) == 3
    assert {p["metadata"]["labels"]["ray.io/node-type"] for p in pods(sb, "team-a", "tune")} == {"head", "worker"}
    step(sb, 5)
    status = get(sb, "ray.io/v1", "RayJob", "team-a", "tune")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Running", "RUNNING")
    step(sb, 105)
    status = get(sb, "ray.io/v1", "RayJob", "team-a", "tune")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert status["endTime"]


def test_volcano_job_phases(sb):
    volcano_setup(sb, {"qa": (8, 8), "qb": (8, 8)})
    vc_job(sb, "team-a", "ddp", queue="qa", workers=2, gpus=4, annotations={"sandbox.gpu-portal.io/outcome": "fail"})
    step(sb, 0)
    phases = [(get(sb, "batch.volcano.sh/v1alpha1", "Job", "team-a", "ddp")["status"]["state"]["phase"],
               podgroup_of(sb, "team-a", "ddp")["status"]["phase"])]
    names = sorted(p["metadata"]["name"] for p in pods(sb, "team-a", "ddp"))
    assert names == ["ddp-master-0", "ddp-worker-0"]
    assert all(p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == podgroup_of(sb, "team-a", "ddp")[
        "metadata"]["name"] for p in pods(sb, "team-a", "ddp"))
    for clock in (5, 105):
        step(sb, clock)
        phases.append((get(sb, "batch.volcano.sh/v1alpha1", "Job", "team-a", "ddp")["status"]["state"]["phase"],
                       podgroup_of(sb, "team-a", "ddp")["status"]["phase"]))
    assert phases == [("Pending", "Inqueue"), ("Running", "Running"), ("Failed", "Completed")]


def test_deleting_a_job_removes_what_it_owned_and_frees_its_quota(sb):
    kueue_setup(sb, SOLO)
    kueue_job(sb, "team-a", "cancelled")
    kueue_job(sb, "team-a", "next")
    step(sb, 0)
    assert len(pods(sb, "team-a")) == 1
    sb.store.delete(sb.store.kind("batch/v1", "Job"), "team-a", "cancelled")
    step(sb, 1)
    assert workload_of(sb, "team-a", "cancelled") is None
    assert [p["metadata"]["ownerReferences"][0]["name"] for p in pods(sb, "team-a")] == ["next"]
    assert kueue_state(sb, "team-a", "next") == "admitted"


def test_finished_jobs_leave_the_index(sb):
    kueue_setup(sb, SOLO)
    for i in range(3):
        kueue_job(sb, "team-a", f"j{i}", gpus=1, annotations={"sandbox.gpu-portal.io/duration-seconds": "0",
                                                             "sandbox.gpu-portal.io/startup-seconds": "0"})
    step(sb, 0)
    step(sb, 1)
    assert sb.simulator.jobs() == []


# --- the control endpoint --------------------------------------------------------------------------------------


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_control_endpoint_changes_how_a_job_ends(sb):
    kueue_setup(sb, SOLO)
    kueue_job(sb, "team-a", "steered")
    code, body = post(f"{sb.url}/_sandbox/jobs/team-a/steered", {"outcome": "fail", "duration": 0})
    assert code == 200 and body["outcome"] == "fail" and body["state"] == "pending"
    step(sb, 0)
    step(sb, 5)
    assert condition(get(sb, "batch/v1", "Job", "team-a", "steered"), "Failed")["status"] == "True"
    listing = json.loads(urllib.request.urlopen(f"{sb.url}/_sandbox/jobs", timeout=5).read())
    assert listing == {"jobs": []}
    assert post(f"{sb.url}/_sandbox/jobs/team-a/nothing", {"outcome": "fail"})[0] == 404
    code, body = post(f"{sb.url}/_sandbox/jobs/team-a/steered", {"outcome": "explode"})
    assert code == 400 and "outcome must be one of" in body["message"]
    assert post(f"{sb.url}/_sandbox/jobs/team-a/steered", {"colour": "red"})[0] == 400


def test_control_endpoint_says_when_simulation_is_off(sandbox):
    code, body = post(f"{sandbox.url}/_sandbox/jobs/team-a/x", {"outcome": "fail"})
    assert code == 404 and "--simulate" in body["message"]


def test_background_ticker_runs_jobs_on_the_wall_clock():
    with Sandbox(simulate=True, tick=0.05, simulation={"duration": 0.2, "startup": 0.05}) as sb:
        create(sb, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        kueue_setup(sb, SOLO)
        kueue_job(sb, "team-a", "quick")
        import time

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if condition(get(sb, "batch/v1", "Job", "team-a", "quick"), "Complete").get("status") == "True":
                break
            time.sleep(0.05)
        assert condition(get(sb, "batch/v1", "Job", "team-a", "quick"), "Complete")["status"] == "True"


def test_a_restarted_sandbox_takes_its_jobs_over(tmp_path):
    state = tmp_path / "state.json"
    options = dict(simulate=True, tick=None, state_file=state, simulation={"duration": 100, "startup": 0})
    with Sandbox(**options) as first:
        create(first, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        kueue_setup(first, SOLO)
        kueue_job(first, "team-a", "done", annotations={"sandbox.gpu-portal.io/duration-seconds": "0"})
        step(first, 0)
        step(first, 1)
        kueue_job(first, "team-a", "running")
        kueue_job(first, "team-a", "waiting")
        step(first, 2)
        step(first, 3)
    with Sandbox(**options) as second:
        assert {(j["name"], j["state"]) for j in second.simulator.jobs()} == {("running", "running"),
                                                                             ("waiting", "pending")}
        second.simulator.step(second.simulator.clock() + 101)
        assert condition(get(second, "batch/v1", "Job", "team-a", "running"), "Complete")["status"] == "True"
        assert kueue_state(second, "team-a", "waiting") == "admitted"


def test_standalone_simulate_flag_runs_jobs_and_takes_requests_from_another_process(free_port, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from kubernetes import client

    from sandbox.testing import api_client

    env = {**os.environ, "SANDBOX_JOB_DURATION_SECONDS": "0.3", "SANDBOX_JOB_STARTUP_SECONDS": "0"}
    process = subprocess.Popen([sys.executable, "-m", "sandbox", "serve", "--port", str(free_port), "--simulate"],
                               cwd=Path(__file__).resolve().parents[2], env=env, stdout=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{free_port}"
    try:
        assert process.stdout.readline().strip() == f"sandbox serving on {url}"
        api = api_client(url)
        custom, batch = client.CustomObjectsApi(api), client.BatchV1Api(api)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "team-a"}})
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", {
            "apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {}})
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", {
            "apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
                "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]}})
        custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team-a", "localqueues", {
            "apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "default"},
            "spec": {"clusterQueue": "cq"}})
        for name in ("ok", "bad"):
            batch.create_namespaced_job("team-a", {
                "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
        assert post(f"{url}/_sandbox/jobs/team-a/bad", {"outcome": "fail"})[0] == 200
        deadline, ends = time.monotonic() + 15, {}
        while time.monotonic() < deadline and len(ends) < 2:
            for name in ("ok", "bad"):
                status = batch.read_namespaced_job_status(name, "team-a").status
                for c in (status.conditions if status else None) or []:
                    if c.type in ("Complete", "Failed") and c.status == "True":
                        ends[name] = c.type
            time.sleep(0.1)
        assert ends == {"ok": "Complete", "bad": "Failed"}
        api.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def test_ray_job_under_volcano_has_kuberays_podgroup(sb):
    volcano_setup(sb, {"qa": (8, 8), "qb": (8, 8)})
    job = ray_job(sb, "team-a", "tune", workers=2, gpus=2)
    rt = sb.store.kind("ray.io/v1", "RayJob")
    sb.store.delete(rt, "team-a", "tune")
    job["metadata"] = {"name": "tune", "namespace": "team-a", "labels": {"volcano.sh/queue-name": "qa"}}
    job.pop("status", None)
    create(sb, "ray.io/v1", "RayJob", job)
    phases = []
    for clock in (0, 5, 105):
        step(sb, clock)
        podgroup = get(sb, VOLCANO, "PodGroup", "team-a", "ray-tune-pg")
        phases.append((podgroup["status"]["phase"], get(sb, "ray.io/v1", "RayJob", "team-a", "tune")["status"][
            "jobDeploymentStatus"]))
    assert podgroup["spec"]["minMember"] == 3 and podgroup["spec"]["queue"] == "qa"
    # KubeRay's Volcano plugin leaves the submitter out of minMember but adds its requests (500m CPU) to
    # minResources (ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go, v1.7.0).
    assert podgroup["spec"]["minResources"]["cpu"] == "3500m"
    assert phases == [("Inqueue", "Initializing"), ("Running", "Running"), ("Completed", "Complete")]


def test_next_event_says_when_the_clock_alone_changes_something(sb):
    """A driver with its own clock (the start-estimates replay) steps at each start after its startup and each
    end, by duration or deadline; nothing pending or active: never."""
    assert sb.simulator.next_event() == float("inf")
    kueue_setup(sb, SOLO)
    kueue_job(sb, "team-a", "short", annotations={"sandbox.gpu-portal.io/duration-seconds": "50"})
    kueue_job(sb, "team-a", "capped", annotations={"sandbox.gpu-portal.io/duration-seconds": "500"}, deadline=60,
              gpus=0)
    step(sb, 0)
    assert sb.simulator.next_event() == T0 + 5  # both start after 5 s
    step(sb, 5)
    assert sb.simulator.next_event() == T0 + 55  # short's end; capped's deadline is at 60
    step(sb, 55)
    assert sb.simulator.next_event() == T0 + 60
    step(sb, 60)
    assert sb.simulator.next_event() == float("inf")
