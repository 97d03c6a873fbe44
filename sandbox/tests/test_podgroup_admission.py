"""Volcano's PodGroup webhooks (pkg/webhooks/admission/podgroups/mutate and validate, both on create), and
the simulated job controller meeting their refusal (pkg/controllers/job/job_controller_actions.go: a Warning
`PodGroupError` Event on the job, retried until the PodGroup is accepted)."""

import pytest

from sandbox import Sandbox
from sandbox.errors import ApiError
from sandbox.tests.test_simulator import VOLCANO, create, items, pods, step, vc_job, volcano_setup


@pytest.fixture
def sb():
    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sandbox:
        create(sandbox, "v1", "Namespace", {"metadata": {"name": "team-a"}})
        yield sandbox


def podgroup(sb, name, **spec):
    return create(sb, VOLCANO, "PodGroup", {"metadata": {"name": name, "namespace": "team-a"},
                                            "spec": {"minMember": 1, **spec}})


def refusal(sb, name, **spec) -> str:
    with pytest.raises(ApiError) as exc:
        podgroup(sb, name, **spec)
    assert exc.value.code == 400
    return exc.value.message


def set_state(sb, queue, state):
    sb.store.patch(sb.store.kind(VOLCANO, "Queue"), None, queue, {"status": {"state": state}}, "merge",
                   subresource="status")


def test_a_podgroup_needs_an_existing_open_queue(sb):
    assert refusal(sb, "pg", queue="nowhere") == (
        'admission webhook "validatepodgroup.volcano.sh" denied the request: '
        'unable to find queue: queue.scheduling.volcano.sh "nowhere" not found')
    volcano_setup(sb, {"qa": (8, 8)})
    set_state(sb, "qa", "Closed")
    assert refusal(sb, "pg", queue="qa").endswith(
        "can only submit PodGroup to queue with state `Open`, queue `qa` status is `Closed`. ")
    set_state(sb, "qa", "Open")
    assert podgroup(sb, "pg", queue="qa")["spec"]["queue"] == "qa"


def test_network_topology_takes_a_tier_number_or_a_tier_name_not_both(sb):
    both = {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "rack"}
    message = refusal(sb, "pg", networkTopology=both)
    assert message.endswith("must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
                            "simultaneously.")
    message = refusal(sb, "pg", subGroupPolicy=[{"name": "workers", "networkTopology": both}])
    assert message.endswith("in subGroupPolicy 'workers': must not specify 'highestTierAllowed' and "
                            "'highestTierName' in networkTopology simultaneously.")
    assert podgroup(sb, "pg", networkTopology={"mode": "hard", "highestTierAllowed": 1})


def test_a_podgroup_in_the_default_queue_takes_its_namespace_queue(sb):
    volcano_setup(sb, {"qa": (8, 8)})
    ns = sb.store.kind("v1", "Namespace")
    sb.store.patch(ns, None, "team-a", {"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "qa"}}},
                   "merge")
    assert podgroup(sb, "defaulted")["spec"]["queue"] == "qa"
    assert podgroup(sb, "chosen", queue="default")["spec"]["queue"] == "qa"
    # Only on create: the queue of an existing PodGroup is its own.
    assert sb.store.get(sb.store.kind(VOLCANO, "PodGroup"), "team-a", "defaulted")["spec"]["queue"] == "qa"


def test_the_job_controller_retries_a_refused_podgroup_and_says_why(sb):
    volcano_setup(sb, {"qa": (8, 8)})
    vc_job(sb, "team-a", "train", queue="qa", workers=1, gpus=4)
    set_state(sb, "qa", "Closed")  # closed after the job was admitted by its own webhook
    step(sb, 0)
    step(sb, 1)
    assert items(sb, VOLCANO, "PodGroup", "team-a") == []
    assert pods(sb, "team-a", "train") == []
    events = [e for e in items(sb, "v1", "Event", "team-a") if e["reason"] == "PodGroupError"]
    assert len(events) == 1  # the same refusal is reported once
    assert events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["kind"] == "Job" and events[0]["involvedObject"]["name"] == "train"
    assert events[0]["message"].startswith('Failed to create PodGroup, err: admission webhook '
                                           '"validatepodgroup.volcano.sh" denied the request: can only submit')
    set_state(sb, "qa", "Open")
    step(sb, 2)
    assert [pg["spec"]["queue"] for pg in items(sb, VOLCANO, "PodGroup", "team-a")] == ["qa"]
    assert len(pods(sb, "team-a", "train")) == 1
