"""Placement scenarios driven through the sandbox's simulator with an explicit clock, each following a behaviour
of the pinned upstream release (named per test): fair sharing between busy teams, spot capacity after reserved
capacity, and topology-constrained gangs."""

import pytest

from sandbox import Sandbox
from sandbox.simulator.model import DURATION_ANNOTATION
from sandbox.tests.test_scheduling_scenarios import cluster_queue, flavors, gpu_group, gpu_job
from sandbox.tests.test_simulator import KUEUE, condition, create, kueue_state, step, workload_of


@pytest.fixture
def sb():
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sandbox:
        for name in ("team-a", "team-b", "team-c"):
            create(sandbox, "v1", "Namespace", {"metadata": {"name": name}})
        yield sandbox


def fair_queue(sb, name, namespace, nominal, weight=None):
    spec = {"namespaceSelector": {}, "cohortName": "pool", "resourceGroups": [gpu_group(nominal, borrowing=16)]}
    if weight is not None:
        spec["fairSharing"] = {"weight": str(weight)}
    create(sb, KUEUE, "ClusterQueue", {"metadata": {"name": name}, "spec": spec})
    create(sb, KUEUE, "LocalQueue", {"metadata": {"name": "default", "namespace": namespace},
                                     "spec": {"clusterQueue": name}})


def admitted_gpus(sb, namespace, names):
    return sum(2 for name in names if kueue_state(sb, namespace, name) == "admitted")


@pytest.mark.parametrize(("weights", "expected"), [
    (None, (12, 4)),  # no fair sharing: after the nominal quotas, first come first served - team-a came first
    ((1, 1), (8, 8)),  # equal weights: the borrowed 8 GPUs are split evenly
    ((3, 1), (10, 6)),  # weight 3 to 1: team-a borrows 6 of the 8, team-b 2
])
def test_fair_sharing_orders_two_busy_teams_by_weighted_share(sb, weights, expected):
    """kueue pkg/scheduler/fair_sharing_iterator.go and pkg/cache/scheduler/fair_sharing.go: each next
    workload is the one whose ClusterQueue's dominant resource share (usage above nominal over what the cohort can
    lend, ×1000, divided by the weight) stays lowest once admitted, entries that need no borrowing first
    (FairSharingPrioritizeNonBorrowing). team-c lends 8 GPUs it does not use; both teams queue 6 jobs of 2 GPUs,
    team-a's first."""
    flavors(sb, "h100")
    fair_queue(sb, "cq-a", "team-a", 4, weights and weights[0])
    fair_queue(sb, "cq-b", "team-b", 4, weights and weights[1])
    cluster_queue(sb, "cq-c", "team-c", [gpu_group(8)], cohort="pool")
    a_jobs, b_jobs = [f"a{i}" for i in range(6)], [f"b{i}" for i in range(6)]
    for name in a_jobs:
        gpu_job(sb, "team-a", name, 2)
    for name in b_jobs:
        gpu_job(sb, "team-b", name, 2)
    step(sb, 0)
    step(sb, 1)
    assert (admitted_gpus(sb, "team-a", a_jobs), admitted_gpus(sb, "team-b", b_jobs)) == expected
    waiting = next(name for name in b_jobs if kueue_state(sb, "team-b", name) != "admitted")
    assert "insufficient unused quota" in condition(workload_of(sb, "team-b", waiting), "QuotaReserved")["message"]


# --- topology and spot (Kueue TAS, flavor taints) ------------------------------------------------------------

LEVELS = ["example.com/block", "example.com/rack", "kubernetes.io/hostname"]
SPOT_TAINT = {"key": "example.com/spot", "value": "true", "effect": "NoSchedule"}
SPOT_TOLERATION = {"key": "example.com/spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def node(sb, name, block, rack, pool="reserved", gpus=8):
    """A node as its kubelet reports it: labels on create, allocatable through the status subresource."""
    create(sb, "v1", "Node", {"metadata": {"name": name, "labels": {
        LEVELS[0]: block, LEVELS[1]: rack, LEVELS[2]: name, "example.com/pool": pool}}})
    sb.store.patch(sb.store.kind("v1", "Node"), None, name, {"status": {"allocatable": {
        "nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi"}}}, "application/merge-patch+json",
        subresource="status")


def tas_cluster(sb, *, spot=False):
    """Reserved nodes: rack r1 (n1, n2) and r2 (n3) in block b1, r3 (n4) in block b2; spot: rack s1 (s1, s2)."""
    create(sb, KUEUE, "Topology", {"metadata": {"name": "gpu-portal"},
                                   "spec": {"levels": [{"nodeLabel": label} for label in LEVELS]}})
    create(sb, KUEUE, "ResourceFlavor", {"metadata": {"name": "h100"}, "spec": {
        "nodeLabels": {"example.com/pool": "reserved"}, "topologyName": "gpu-portal"}})
    for name, block, rack in (("n1", "b1", "r1"), ("n2", "b1", "r1"), ("n3", "b1", "r2"), ("n4", "b2", "r3")):
        node(sb, name, block, rack)
    flavors_ = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "32"}]}]
    if spot:
        create(sb, KUEUE, "ResourceFlavor", {"metadata": {"name": "h100-spot"}, "spec": {
            "nodeLabels": {"example.com/pool": "spot"}, "nodeTaints": [SPOT_TAINT], "topologyName": "gpu-portal"}})
        for name in ("s1", "s2"):
            node(sb, name, "b9", "s1", pool="spot")
        flavors_.append({"name": "h100-spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]})
    create(sb, KUEUE, "ClusterQueue", {"metadata": {"name": "cq-a"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors_}]}})
    create(sb, KUEUE, "LocalQueue", {"metadata": {"name": "default", "namespace": "team-a"},
                                     "spec": {"clusterQueue": "cq-a"}})


def gang(sb, name, workers, *, level="", mode="required", spot=False, seconds=100):
    annotations = {f"kueue.x-k8s.io/podset-{mode}-topology": level} if level else {}
    spec = {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    if spot:
        spec["tolerations"] = [SPOT_TOLERATION]
    template = {"metadata": {"annotations": annotations}, "spec": spec}
    create(sb, "batch/v1", "Job", {"metadata": {"name": name, "namespace": "team-a",
                                                "labels": {"kueue.x-k8s.io/queue-name": "default"},
                                                "annotations": {DURATION_ANNOTATION: str(seconds)}},
                                   "spec": {"parallelism": workers, "completions": workers, "template": template}})


def assignment(sb, name):
    return workload_of(sb, "team-a", name)["status"]["admission"]["podSetAssignments"][0]


@pytest.mark.parametrize(("dept_weights", "expected"), [
    ((1, 1), (6, 6)),  # dept-a's two teams together get what dept-b's one team gets: the split is per department
    ((2, 1), (8, 4)),  # weight 2 to 1 on the Cohorts: dept-a gets two thirds
])
def test_fair_sharing_splits_between_cohorts_first_then_within_them(sb, dept_weights, expected):
    """kueue pkg/scheduler/fair_sharing_iterator.go (runTournament, computeDRS): at the root cohort the
    heads are compared by the share of the department Cohort they come through (its usage above its quota over
    what the root can lend, divided by the Cohort's fairSharing.weight), and only within a department by their
    ClusterQueues' shares. The root lends 12 GPUs; teams a1 and a2 (department dept-a) and b1 (dept-b) each queue
    six 2-GPU jobs. Compared flat, ClusterQueue by ClusterQueue, b1 would get only 4 of the 12."""
    flavors(sb, "h100")
    create(sb, KUEUE, "Cohort", {"metadata": {"name": "org"}, "spec": {"resourceGroups": [gpu_group(12)]}})
    for name, weight in zip(("dept-a", "dept-b"), dept_weights, strict=True):
        create(sb, KUEUE, "Cohort", {"metadata": {"name": name}, "spec": {
            "parentName": "org", "fairSharing": {"weight": str(weight)}}})
    for cq, namespace, cohort in (("a1", "team-a", "dept-a"), ("a2", "team-b", "dept-a"), ("b1", "team-c", "dept-b")):
        cluster_queue(sb, cq, namespace, [gpu_group(0)], cohort=cohort)
        for i in range(6):
            gpu_job(sb, namespace, f"{cq}-{i}", 2)
    step(sb, 0)
    step(sb, 1)
    names = {ns: [f"{cq}-{i}" for i in range(6)] for cq, ns in (("a1", "team-a"), ("a2", "team-b"), ("b1", "team-c"))}
    dept_a = admitted_gpus(sb, "team-a", names["team-a"]) + admitted_gpus(sb, "team-b", names["team-b"])
    assert (dept_a, admitted_gpus(sb, "team-c", names["team-c"])) == expected
    assert abs(admitted_gpus(sb, "team-a", names["team-a"]) - admitted_gpus(sb, "team-b", names["team-b"])) <= 2


def test_required_topology_waits_for_one_domain_where_quota_would_do(sb):
    """apis/kueue/v1beta1/topology_types.go podset-required-topology, tas_flavor_snapshot.go notFitMessage: three
    8-GPU workers kept within one rack fit no rack (the largest holds two), though quota has room for four."""
    tas_cluster(sb)
    gang(sb, "rack-gang", 3, level=LEVELS[1])
    step(sb, 0)
    assert kueue_state(sb, "team-a", "rack-gang") == "pending"
    assert condition(workload_of(sb, "team-a", "rack-gang"), "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: topology \"gpu-portal\" allows to fit only 2 out of 3 pod(s)")


def test_required_block_places_the_gang_inside_it_and_preferred_rack_spreads():
    """A required block fits in b1 (three nodes); a preferred rack that no rack can hold is spread over the
    fewest domains instead of waiting (podset-preferred-topology)."""
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sb:
        create(sb, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        tas_cluster(sb)
        gang(sb, "block-gang", 3, level=LEVELS[0])
        step(sb, 0)
        placed = assignment(sb, "block-gang")["topologyAssignment"]
        assert placed["levels"] == LEVELS[-1:]  # the hostname alone, the lowest level (buildAssignment)
        assert {s["valuesPerLevel"][0]["universal"] for s in placed["slices"]} == {"n1", "n2", "n3"}  # block b1
        assert sum(s["podCounts"]["universal"] for s in placed["slices"]) == 3
        gang(sb, "soft-gang", 1, level=LEVELS[1], mode="preferred")
        step(sb, 1)
        assert kueue_state(sb, "team-a", "soft-gang") == "admitted"
        assert assignment(sb, "soft-gang")["topologyAssignment"]["slices"][0]["valuesPerLevel"][0] == {
            "universal": "n4"}  # the only node left, in r3


def _cpu_gang(sb, name, *, level=""):
    """Two 8-GPU workers that also ask for CPU, with or without a required rack."""
    annotations = {"kueue.x-k8s.io/podset-required-topology": level} if level else {}
    template = {"metadata": {"annotations": annotations}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}, "limits": {"nvidia.com/gpu": "8"}}}]}}
    create(sb, "batch/v1", "Job", {"metadata": {"name": name, "namespace": "team-a",
                                                "labels": {"kueue.x-k8s.io/queue-name": "default"}},
                                   "spec": {"parallelism": 2, "completions": 2, "template": template}})


@pytest.mark.parametrize("one_group", [False, True])
def test_a_pod_set_takes_every_resource_from_a_topology_flavor_or_none(one_group):
    """pkg/scheduler/flavorassigner/tas_flavorassigner.go (checkPodSetAndFlavorMatchForTAS) and
    pkg/cache/scheduler/clusterqueue.go (isTASOnly): with CPU in a group of its own under a flavor that names no
    topology, a pod set asking for a rack is refused that flavor, and one asking for none is refused the TAS
    flavor. One group covering cpu and nvidia.com/gpu with the TAS flavor places both: the first in one rack, the
    second by implied TAS (every flavor of the queue names a topology)."""
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sb:
        create(sb, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        tas_cluster(sb)
        if one_group:
            groups = [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [
                {"name": "cpu", "nominalQuota": "64"}, {"name": "nvidia.com/gpu", "nominalQuota": "32"}]}]}]
        else:
            flavors(sb, "cpu")
            groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "cpu", "resources": [
                {"name": "cpu", "nominalQuota": "64"}]}]}, gpu_group(32)]
        sb.store.patch(sb.store.kind(KUEUE, "ClusterQueue"), None, "cq-a", {"spec": {"resourceGroups": groups}},
                       "application/merge-patch+json")
        _cpu_gang(sb, "ring", level=LEVELS[1])
        _cpu_gang(sb, "loose")
        step(sb, 0)
        if one_group:
            assert (kueue_state(sb, "team-a", "ring"), kueue_state(sb, "team-a", "loose")) == ("admitted", "admitted")
            placed = assignment(sb, "ring")["topologyAssignment"]
            assert {s["valuesPerLevel"][0]["universal"] for s in placed["slices"]} == {"n1", "n2"}  # rack r1
            assert set(assignment(sb, "ring")["flavors"].values()) == {"h100"}
            return
        assert condition(workload_of(sb, "team-a", "ring"), "QuotaReserved")["message"] == (
            'couldn\'t assign flavors to pod set main: Flavor "cpu" does not support TopologyAwareScheduling')
        assert condition(workload_of(sb, "team-a", "loose"), "QuotaReserved")["message"] == (
            'couldn\'t assign flavors to pod set main: Flavor "h100" supports only TopologyAwareScheduling')


def test_spot_takes_over_when_reserved_is_full_and_a_lost_spot_node_sends_the_job_back(sb):
    """flavorassigner.go: a flavor whose taints the pods do not tolerate is skipped ("untolerated taint"); the
    next flavor in the group is tried when the first is full (whenCanPreempt TryNextFlavor, nothing to preempt).
    scheduler.go evictWorkloadAfterFailedTASReplacement: when the spot nodes go, the workload is evicted with
    NodeFailures and queues again, now on reserved capacity that has come free."""
    tas_cluster(sb, spot=True)
    gang(sb, "reserved-4", 4)  # fills the 4 reserved nodes
    step(sb, 0)
    gang(sb, "no-spot", 2)
    gang(sb, "may-spot", 2, spot=True, seconds=1000)
    step(sb, 1)
    assert assignment(sb, "reserved-4")["flavors"] == {"nvidia.com/gpu": "h100"}
    assert kueue_state(sb, "team-a", "no-spot") == "pending"
    assert "untolerated taint example.com/spot=true:NoSchedule in flavor h100-spot" in condition(
        workload_of(sb, "team-a", "no-spot"), "QuotaReserved")["message"]
    assert assignment(sb, "may-spot")["flavors"] == {"nvidia.com/gpu": "h100-spot"}
    step(sb, 10)  # running from here, for 100 s
    step(sb, 111)  # reserved-4 has finished; no-spot takes two of its nodes
    assert kueue_state(sb, "team-a", "no-spot") == "admitted"
    for name in ("s1", "s2"):
        sb.store.delete(sb.store.kind("v1", "Node"), None, name)
    step(sb, 112)
    evicted = condition(workload_of(sb, "team-a", "may-spot"), "Evicted")
    assert (evicted["reason"], evicted["message"]) == (
        "NodeFailures", "Workload was evicted as there was no replacement for unhealthy node(s): s1,s2")
    assert kueue_state(sb, "team-a", "may-spot") == "preempted"
    step(sb, 130)
    assert kueue_state(sb, "team-a", "may-spot") == "admitted"
    assert assignment(sb, "may-spot")["flavors"] == {"nvidia.com/gpu": "h100"}


# --- admission ----------------------------------------------------------------------------------------------


def test_kueue_refuses_two_topology_requests_on_one_pod_set_and_a_bad_label(objects):
    """jobframework/tas_validation.go ValidateTASPodSetRequest, called by the batch Job webhook (vjob.kb.io)."""
    def job(name, annotations):
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": name, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
            "spec": {"template": {"metadata": {"annotations": annotations}, "spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "trainer:2"}]}}}}

    both = objects.refused(job("both", {"kueue.x-k8s.io/podset-required-topology": "example.com/rack",
                                        "kueue.x-k8s.io/podset-preferred-topology": "example.com/block"}))
    assert both.code == 403 and both.message == (
        'admission webhook "vjob.kb.io" denied the request: spec.template.metadata.annotations: Invalid value: must '
        'not contain more than one topology annotation: ["kueue.x-k8s.io/podset-required-topology", '
        '"kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-unconstrained-topology"]')
    bad = objects.refused(job("bad", {"kueue.x-k8s.io/podset-required-topology": "rack label"}))
    assert 'annotations[kueue.x-k8s.io/podset-required-topology]: Invalid value: "rack label"' in bad.message
    objects.create(job("fine", {"kueue.x-k8s.io/podset-required-topology": "example.com/rack"}))


def test_volcano_refuses_a_network_topology_with_both_highest_tier_fields(objects):
    """volcano pkg/webhooks/admission/jobs/validate/admit_job.go validateNetworkTopology."""
    from sandbox.tests.test_admission_controllers import _vcjob

    both = _vcjob(networkTopology={"mode": "hard", "highestTierAllowed": 1, "highestTierName": "rack"})
    assert objects.refused(both).message == (
        "admission webhook \"validatejob.volcano.sh\" denied the request: must not specify 'highestTierAllowed' "
        "and 'highestTierName' in networkTopology simultaneously")
    objects.create(_vcjob(networkTopology={"mode": "soft", "highestTierAllowed": 2}), dry_run=True)


@pytest.mark.parametrize(("weights", "borrower_keeps_its_gpus"), [((1, 1), False), ((3, 1), True)])
def test_volcano_proportion_deals_deserved_shares_by_weight(sb, weights, borrower_keeps_its_gpus):
    """volcano plugins/proportion/proportion.go: deserved is the cluster dealt out by weight up to each
    queue's request; actions/reclaim takes back only from a queue above its deserved share. 16 GPUs: qa runs 12,
    qb asks for 8. At 1:1 qa deserves 8 and is reclaimed from; at 3:1 it deserves the 12 it holds and keeps them."""
    import yaml

    from sandbox.tests.test_simulator import VOLCANO, get, items, pods, vc_job

    for name, weight in zip(("qa", "qb"), weights, strict=True):
        create(sb, VOLCANO, "Queue", {"metadata": {"name": name}, "spec": {
            "weight": weight, "reclaimable": True, "capability": {"nvidia.com/gpu": "16"},
            "deserved": {"nvidia.com/gpu": "8"}}})  # spec.deserved is the capacity plugin's: proportion ignores it
    conf = {"actions": "enqueue, allocate, backfill, reclaim", "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
        {"plugins": [{"name": "drf", "enablePreemptable": False}, {"name": "predicates"}, {"name": "proportion"}]}]}
    create(sb, "v1", "Namespace", {"metadata": {"name": "volcano-system"}})
    create(sb, "v1", "ConfigMap", {"metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                                   "data": {"volcano-scheduler.conf": yaml.safe_dump(conf)}})
    vc_job(sb, "team-a", "borrower", queue="qa", workers=2, gpus=6)
    step(sb, 0)
    assert len(pods(sb, "team-a", "borrower")) == 2
    vc_job(sb, "team-b", "owner", queue="qb", workers=1, gpus=8)
    step(sb, 1)
    state = get(sb, "batch.volcano.sh/v1alpha1", "Job", "team-a", "borrower")["status"]["state"]
    if borrower_keeps_its_gpus:
        assert len(pods(sb, "team-a", "borrower")) == 2 and pods(sb, "team-b", "owner") == []
    else:
        assert (state["phase"], "message" in state) == ("Pending", False)
        evicts = [e["message"] for e in items(sb, "v1", "Event", "team-a")
                  if e["reason"] == "Evict" and e["involvedObject"]["kind"] == "PodGroup"]
        assert evicts == ["reclaim"]
        assert len(pods(sb, "team-b", "owner")) == 1
