"""The sandbox's Kueue with waitForPodsReady, on by default since Kueue v0.19 (kueue apis/config/v1beta2/defaults.go:
a 30-minute timeout, requeuing with a backoff of 60 s doubling up to an hour): the PodsReady condition, and a
workload whose pods are not all ready in time evicted, its quota released and requeued after the backoff
(pkg/controller/core/workload_controller.go reconcileNotReadyTimeout, pkg/workload/workload.go UpdateRequeueState).
The controllers lane runs the same case against the real Kueue (tests/controllers/test_kueue.py)."""

import pytest

from sandbox import Sandbox
from sandbox.tests.test_simulator import SOLO, condition, create, get, kueue_job, kueue_setup, workload_of

T0 = 1_800_000_000.0
SLOW = {"sandbox.gpu-portal.io/startup-seconds": "4000"}


@pytest.fixture
def sb():
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sandbox:
        create(sandbox, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        kueue_setup(sandbox, SOLO)
        yield sandbox


def step(sb, seconds):
    sb.simulator.step(T0 + seconds)


def said(workload, kind):
    found = condition(workload, kind)
    return found.get("status"), found.get("reason")


def test_pods_ready_is_false_until_every_pod_runs_then_true(sb):
    kueue_job(sb, "team-a", "quick")
    step(sb, 0)
    workload = workload_of(sb, "team-a", "quick")
    assert said(workload, "PodsReady") == ("False", "WaitForStart")
    assert condition(workload, "PodsReady")["message"] == "Not all pods are ready or succeeded"
    step(sb, 5)
    workload = workload_of(sb, "team-a", "quick")
    assert said(workload, "PodsReady") == ("True", "Started")
    assert condition(workload, "PodsReady")["message"] == "All pods reached readiness and the workload is running"


def test_pods_not_ready_in_time_are_evicted_then_requeued_after_the_backoff(sb):
    kueue_job(sb, "team-a", "stuck", annotations=SLOW)
    kueue_job(sb, "team-a", "next")
    step(sb, 0)
    assert said(workload_of(sb, "team-a", "next"), "QuotaReserved") == ("False", "Pending")
    step(sb, 1799)
    assert said(workload_of(sb, "team-a", "stuck"), "Evicted") == (None, None)
    step(sb, 1800)
    workload = workload_of(sb, "team-a", "stuck")
    name = workload["metadata"]["name"]
    assert said(workload, "Evicted") == ("True", "PodsReadyTimeout")
    assert condition(workload, "Evicted")["message"] == f"Exceeded the PodsReady timeout team-a/{name}"
    assert said(workload, "Requeued") == ("False", "PodsReadyTimeout")
    assert said(workload, "Preempted") == (None, None)
    # T0 is 08:00:00: evicted at 08:30:00, back in the queue a minute later.
    assert workload["status"]["requeueState"] == {"count": 1, "requeueAt": "2027-01-15T08:31:00Z"}
    assert get(sb, "batch/v1", "Job", "team-a", "stuck")["spec"]["suspend"] is True
    # The quota it held goes to the job waiting behind it, while it waits out its backoff.
    step(sb, 1801)
    assert said(workload_of(sb, "team-a", "next"), "Admitted") == ("True", "Admitted")
