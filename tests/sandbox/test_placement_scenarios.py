"""Placement scenarios driven through the sandbox's simulator with an explicit clock, each following a behaviour
of the pinned upstream release (named per test): fair sharing between busy teams, spot capacity after reserved
capacity, and topology-constrained gangs."""

import pytest

from sandbox import Sandbox
from tests.sandbox.test_scheduling_scenarios import cluster_queue, flavors, gpu_group, gpu_job
from tests.sandbox.test_simulator import KUEUE, condition, create, kueue_state, step, workload_of


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
    """kueue v0.19.2 pkg/scheduler/fair_sharing_iterator.go and pkg/cache/scheduler/fair_sharing.go: each next
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
