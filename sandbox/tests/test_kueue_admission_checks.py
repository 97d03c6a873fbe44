"""The sandbox's Kueue admission checks, as kueue runs them (sandbox/simulator/kueue_checks.py names the
files): a queue listing an inactive check admits nothing; a workload gets one Pending entry per check, keeps its
quota reservation while a check is not Ready (and runs no pod), is admitted once all are Ready; Retry releases the
reservation and resets the checks; Rejected deactivates the workload."""

import pytest

from sandbox import Sandbox
from sandbox.tests.test_scheduling_scenarios import flavors, gpu_group, gpu_job
from sandbox.tests.test_simulator import KUEUE, condition, create, get, pods, step, workload_of

CHECK = "budget"


@pytest.fixture
def sb():
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sandbox:
        create(sandbox, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        flavors(sandbox, "h100")
        create(sandbox, KUEUE, "AdmissionCheck", {"metadata": {"name": CHECK},
                                                  "spec": {"controllerName": "example.com/budget"}})
        spec = {"namespaceSelector": {}, "resourceGroups": [gpu_group(8)],
                "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}}
        create(sandbox, KUEUE, "ClusterQueue", {"metadata": {"name": "cq-a"}, "spec": spec})
        create(sandbox, KUEUE, "LocalQueue", {"metadata": {"name": "default", "namespace": "team-a"},
                                              "spec": {"clusterQueue": "cq-a"}})
        yield sandbox


def activate(sb):
    store = sb.store
    rt = store.kind(KUEUE, "AdmissionCheck")
    store.patch(rt, None, CHECK, {"status": {"conditions": [
        {"type": "Active", "status": "True", "reason": "Active", "message": "", "lastTransitionTime":
         "2026-01-01T00:00:00Z"}]}}, "merge", subresource="status")


def set_check(sb, name, state, message="", **extra):
    workload = workload_of(sb, "team-a", name)
    rt = sb.store.kind(KUEUE, "Workload")
    entry = {"name": CHECK, "state": state, "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z", **extra}
    sb.store.patch(rt, "team-a", workload["metadata"]["name"], {"status": {"admissionChecks": [entry]}}, "merge",
                   subresource="status")


def checks_of(sb, name):
    return (workload_of(sb, "team-a", name).get("status") or {}).get("admissionChecks") or []


def test_a_queue_listing_an_inactive_check_admits_nothing(sb):
    gpu_job(sb, "team-a", "train", 2)
    step(sb, 0)
    workload = workload_of(sb, "team-a", "train")
    assert condition(workload, "QuotaReserved") == {**condition(workload, "QuotaReserved"), "status": "False",
                                                    "reason": "Inadmissible",
                                                    "message": "ClusterQueue cq-a is inactive"}
    assert [c["state"] for c in checks_of(sb, "train")] == ["Pending"]


def test_a_workload_keeps_its_reservation_until_the_check_is_ready(sb):
    activate(sb)
    gpu_job(sb, "team-a", "train", 6)
    gpu_job(sb, "team-a", "other", 4)
    step(sb, 0)
    workload = workload_of(sb, "team-a", "train")
    assert condition(workload, "QuotaReserved")["status"] == "True"
    assert (condition(workload, "Admitted")["status"], condition(workload, "Admitted")["reason"]) == (
        "False", "UnsatisfiedChecks")
    assert workload["status"]["admission"]["clusterQueue"] == "cq-a"
    assert get(sb, "batch/v1", "Job", "team-a", "train")["spec"]["suspend"] is True
    assert pods(sb, "team-a", "train") == []
    # The reservation counts: 6 of 8 reserved, so the 4-GPU job does not fit.
    assert condition(workload_of(sb, "team-a", "other"), "QuotaReserved")["status"] == "False"
    set_check(sb, "train", "Ready")
    step(sb, 1)
    assert condition(workload_of(sb, "team-a", "train"), "Admitted")["status"] == "True"
    assert get(sb, "batch/v1", "Job", "team-a", "train")["spec"]["suspend"] is False
    assert len(pods(sb, "team-a", "train")) == 1


def test_retry_releases_the_reservation_and_resets_the_check(sb):
    activate(sb)
    gpu_job(sb, "team-a", "train", 6)
    step(sb, 0)
    set_check(sb, "train", "Retry", "over budget", requeueAfterSeconds=30)
    gpu_job(sb, "team-a", "other", 4)
    step(sb, 1)
    workload = workload_of(sb, "team-a", "train")
    evicted = condition(workload, "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", "AdmissionCheck")
    assert evicted["message"] == 'Evicted due to AdmissionCheck in Retry state: "budget" (over budget)'
    assert workload["status"].get("admission") is None
    assert checks_of(sb, "train") == [{"name": CHECK, "state": "Pending",
                                       "message": "Reset to Pending after eviction. Previously: Retry",
                                       "lastTransitionTime": checks_of(sb, "train")[0]["lastTransitionTime"],
                                       "requeueAfterSeconds": 30, "retryCount": 1}]
    step(sb, 2)  # the released quota goes to the other workload; train waits out its requeue delay
    assert condition(workload_of(sb, "team-a", "other"), "QuotaReserved")["status"] == "True"
    assert condition(workload_of(sb, "team-a", "train"), "QuotaReserved")["status"] == "False"


def test_rejected_deactivates_the_workload(sb):
    activate(sb)
    gpu_job(sb, "team-a", "train", 6)
    step(sb, 0)
    set_check(sb, "train", "Rejected", "never")
    step(sb, 1)
    workload = workload_of(sb, "team-a", "train")
    assert workload["spec"]["active"] is False
    assert condition(workload, "Evicted")["reason"] == "Deactivated"
    assert condition(workload, "Evicted")["message"] == (
        'The workload is deactivated due to AdmissionCheck in Rejected state: "budget" (never)')
    gpu_job(sb, "team-a", "other", 8)
    step(sb, 2)
    assert condition(workload_of(sb, "team-a", "other"), "QuotaReserved")["status"] == "True"
