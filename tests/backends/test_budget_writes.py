"""What each backend writes to hold or release a team (`Backend.budget_writes`, pure): a table of Workloads under
Kueue, the team's Queue under Volcano, compared whole."""

import pytest

from backends import backend_for
from backends.base import ANY_FLAVOR

KUEUE_API = "kueue.x-k8s.io/v1beta2"
NOW = "2026-11-20T10:00:00Z"
SENTENCE = "Held by the budget's GPU-hour allowance: nlp used 10 of its 8 h100 GPU-hours in the last 7 days, 2 over."


def workload(name, *, check="Pending", message="", flavor=None, reserved_at="2026-11-20T09:58:00Z", admitted=False,
             retries=0):
    status = {"admissionChecks": [{"name": "gpu-portal-budget", "state": check, "message": message,
                                   "lastTransitionTime": "2026-11-20T09:00:00Z",
                                   **({"retryCount": retries} if retries else {})}],
              "conditions": [{"type": "Admitted", "status": "True" if admitted else "False"}]}
    if flavor:
        status["admission"] = {"clusterQueue": "nlp", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": flavor, "nvidia.com/gpu": flavor}}]}
        status["conditions"].append({"type": "QuotaReserved", "status": "True", "lastTransitionTime": reserved_at})
    return {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": {"name": name, "namespace": "nlp"},
            "status": status}


def entry(state, message="", **extra):
    return {"name": "gpu-portal-budget", "state": state, "message": message, "lastTransitionTime": NOW, **extra}


def written(name, state, message="", **extra):
    return {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": {"name": name, "namespace": "nlp"},
            "status": {"admissionChecks": [entry(state, message, **extra)]}}


def h100_held(flavors):
    return SENTENCE if flavors is not None and "h100" in flavors else ""


def nothing_held(flavors):
    return ""


def money_held(flavors):
    return "Held by the budget: nlp has spent 200.00 USD of its 100.00 USD hard budget."


@pytest.mark.parametrize(("objects", "hold", "expected"), [
    # reserved on a held flavor: Pending with the sentence; then nothing more to write
    ([workload("a", flavor="h100")], h100_held, [written("a", "Pending", SENTENCE)]),
    ([workload("a", flavor="h100", message=SENTENCE)], h100_held, []),
    # reserved on another flavor, or nothing held: Ready
    ([workload("a", flavor="a100")], h100_held, [written("a", "Ready")]),
    ([workload("a", flavor="h100", message=SENTENCE)], nothing_held, [written("a", "Ready")]),
    # no reservation yet: a flavor's hold waits for the flavor; a hold on every flavor is said at once
    ([workload("a")], h100_held, []),
    ([workload("a")], money_held, [written("a", "Pending", money_held(None))]),
    # the money hold lifted before the reservation: its words are taken back, the decision waits
    ([workload("a", message=money_held(None))], nothing_held, [written("a", "Pending")]),
    # held with its reservation for 10 minutes: sent back (Retry) to queue again in 10 minutes
    ([workload("a", flavor="h100", message=SENTENCE, reserved_at="2026-11-20T09:50:00Z")], h100_held,
     [written("a", "Retry", SENTENCE, requeueAfterSeconds=600)]),
    # sent back before and waiting to queue again: it says the budget, not Kueue's reset words
    ([workload("a", message="Reset to Pending after eviction. Previously: Retry", retries=1)],
     lambda flavors: SENTENCE if flavors == ANY_FLAVOR or (flavors and "h100" in flavors) else "",
     [written("a", "Pending", SENTENCE)]),
    # admitted ones are left alone
    ([workload("a", flavor="h100", check="Ready", admitted=True)], h100_held, []),
])
def test_kueue_sets_the_check_on_each_workload(objects, hold, expected):
    assert backend_for("kueue").budget_writes(objects, queue_name="nlp", hold_message=hold, now=NOW,
                                              release_after=600) == expected


def queue(state=None):
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "nlp"},
            "status": {"state": state} if state else {}}


def closed_or_open(state):
    return [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "nlp"},
             "status": {"state": state}}]


@pytest.mark.parametrize(("live", "hold", "expected"), [
    (queue("Open"), h100_held, closed_or_open("Closed")),  # a hold on any flavor closes the queue
    (queue(), money_held, closed_or_open("Closed")),
    (queue("Closed"), h100_held, []),
    (queue("Closing"), h100_held, []),  # closed with pod groups still running
    (queue("Closed"), nothing_held, closed_or_open("Open")),
    (queue("Open"), nothing_held, []),
])
def test_volcano_closes_and_reopens_the_team_queue(live, hold, expected):
    def message(flavors):
        return hold(["h100"] if flavors == ANY_FLAVOR else flavors)

    other = {**queue("Open"), "metadata": {"name": "vision"}}
    assert backend_for("volcano").budget_writes([other, live], queue_name="nlp", hold_message=message,
                                                now=NOW) == expected
