"""The sandbox's Kueue admission fair sharing (kueue pkg/controller/core/localqueue_controller.go,
pkg/util/admissionfairsharing, pkg/cache/queue/cluster_queue.go queueOrderingFunc), driven by an explicit clock:
the decayed usage a LocalQueue's status reports, against hand-computed figures, and the order it gives the
LocalQueues of one ClusterQueue."""

import pytest
import yaml

from sandbox import Sandbox
from sandbox.tests.test_scheduling_scenarios import flavors, gpu_group, gpu_job
from sandbox.tests.test_simulator import KUEUE, create, get, kueue_state, step

SAMPLING = 300


@pytest.fixture
def sb():
    with Sandbox(simulate=True, tick=None, simulation={"duration": 10**6, "startup": 0}) as sandbox:
        for name in ("team-a", "team-b", "kueue-system"):
            create(sandbox, "v1", "Namespace", {"metadata": {"name": name}})
        yield sandbox


def configure(sb, half_life="1h", sampling="5m"):
    """Kueue's Configuration as its manifests mount it, with admission fair sharing."""
    block = {"usageHalfLifeTime": half_life, "usageSamplingInterval": sampling}
    create(sb, "v1", "ConfigMap", {"metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                                   "data": {"controller_manager_config.yaml": yaml.safe_dump(
                                       {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                        "admissionFairSharing": block})}})


def shared_queue(sb, nominal=4, weights=(None, None), scope=True):
    """One ClusterQueue fed by a LocalQueue in each of team-a and team-b."""
    spec = {"namespaceSelector": {}, "resourceGroups": [gpu_group(nominal)]}
    if scope:
        spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    flavors(sb, "h100")
    create(sb, KUEUE, "ClusterQueue", {"metadata": {"name": "shared"}, "spec": spec})
    for namespace, weight in zip(("team-a", "team-b"), weights, strict=True):
        lq_spec = {"clusterQueue": "shared"}
        if weight is not None:
            lq_spec["fairSharing"] = {"weight": str(weight)}
        create(sb, KUEUE, "LocalQueue", {"metadata": {"name": "default", "namespace": namespace}, "spec": lq_spec})


def afs_status(sb, namespace):
    lq = get(sb, KUEUE, "LocalQueue", namespace, "default")
    return ((lq.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")


def run(sb, start, end):
    for t in range(start, end + 1, SAMPLING):
        step(sb, t)


def delete_job(sb, namespace, name):
    sb.store.delete(sb.store.kind("batch/v1", "Job"), namespace, name)


def test_consumed_resources_decay_with_the_half_life(sb):
    """4 GPUs held from T0 with a half-life of 1 h, sampled every 5 min: the first sample only seeds (elapsed 0);
    then α = 1 − 0.5^(300/3600) = 0.0561256873…, so one sample gives 4α = 0.224502749 (rounded down to 9 digits,
    MulByFloat); after an hour of samples 4 × (1 − 0.5) = 2; the job gone, another hour halves it to 1."""
    configure(sb)
    shared_queue(sb)
    gpu_job(sb, "team-a", "a0", 4)
    step(sb, 0)
    assert kueue_state(sb, "team-a", "a0") == "admitted"
    assert afs_status(sb, "team-a") == {"consumedResources": {"nvidia.com/gpu": "0"},
                                        "lastUpdate": "2027-01-15T08:00:00Z"}
    step(sb, 299)  # within the sampling interval: not sampled
    assert afs_status(sb, "team-a")["lastUpdate"] == "2027-01-15T08:00:00Z"
    step(sb, 300)
    assert afs_status(sb, "team-a") == {"consumedResources": {"nvidia.com/gpu": "224502749n"},
                                        "lastUpdate": "2027-01-15T08:05:00Z"}
    run(sb, 600, 3600)
    consumed = float(afs_status(sb, "team-a")["consumedResources"]["nvidia.com/gpu"].removesuffix("n")) / 1e9
    assert consumed == pytest.approx(2.0, abs=1e-7)
    delete_job(sb, "team-a", "a0")
    run(sb, 3900, 7200)
    consumed = float(afs_status(sb, "team-a")["consumedResources"]["nvidia.com/gpu"].removesuffix("n")) / 1e9
    assert consumed == pytest.approx(1.0, abs=1e-7)
    assert afs_status(sb, "team-b")["consumedResources"] == {}  # nothing admitted: nothing to weigh


def test_a_half_life_of_zero_keeps_nothing(sb):
    """The upstream default (no usageHalfLifeTime): every sample resets the consumed resources to nothing."""
    configure(sb, half_life="0s")
    shared_queue(sb)
    gpu_job(sb, "team-a", "a0", 4)
    run(sb, 0, 3600)
    assert afs_status(sb, "team-a") == {"consumedResources": {}, "lastUpdate": "2027-01-15T09:00:00Z"}


def test_without_the_configuration_block_nothing_is_written(sb):
    shared_queue(sb)
    gpu_job(sb, "team-a", "a0", 4)
    run(sb, 0, 600)
    assert afs_status(sb, "team-a") is None


@pytest.mark.parametrize(("half_life", "scope", "weights", "first"), [
    ("1h", True, (None, None), "team-b"),  # team-a used the queue for an hour: team-b, which came later, goes first
    ("1h", False, (None, None), "team-a"),  # the ClusterQueue does not use it: first come
    ("0s", True, (None, None), "team-a"),  # half-life 0: nobody has usage, first come
    ("1h", True, (8, None), "team-a"),  # team-a's 1.5 GPUs of decayed usage ÷ 8 < team-b's 0.5 ÷ 1
])
def test_lower_decayed_usage_per_weight_goes_first(sb, half_life, scope, weights, first):
    """For an hour team-a holds 4 GPUs of the ClusterQueue, or 3 while team-b holds 1 (the last row); then both
    queue a job for all 4 GPUs, team-a's first. The ClusterQueue tries its LocalQueues' workloads by decayed usage
    ÷ weight, then by priority and creation."""
    configure(sb, half_life=half_life)
    shared_queue(sb, weights=weights, scope=scope)
    if weights[0]:
        gpu_job(sb, "team-a", "warm", 3)
        gpu_job(sb, "team-b", "warm", 1)
    else:
        gpu_job(sb, "team-a", "warm", 4)
    run(sb, 0, 3300)
    for namespace in ("team-a", "team-b"):
        if weights[0] or namespace == "team-a":
            delete_job(sb, namespace, "warm")
    gpu_job(sb, "team-a", "next", 4)
    gpu_job(sb, "team-b", "next", 4)
    step(sb, 3600)
    admitted = [ns for ns in ("team-a", "team-b") if kueue_state(sb, ns, "next") == "admitted"]
    assert admitted == [first]
