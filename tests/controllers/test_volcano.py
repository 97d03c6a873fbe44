"""The portal on the real Volcano: queues applied and opened by its controller, a job running and the next one
waiting in Volcano's own words, and the quota page's in-use figure from Volcano's status."""

import pytest

from composition import reconcile
from jobs import selectors
from jobs.choices import JobState
from portal import kube
from quotas import selectors as quota_selectors
from tests.controllers.conftest import build_real_world, sync_until, wait_for
from tests.jobs.test_simulated import submit

pytestmark = [pytest.mark.controllers, pytest.mark.django_db(transaction=True)]


def test_an_approved_quota_becomes_a_queue_that_volcano_opens(volcano_cluster):
    world = build_real_world(volcano_cluster, "volcano")
    client = kube.client_for_cluster(world["cluster"])

    def opened():
        queue = client.get("scheduling.volcano.sh/v1beta1", "Queue", "nlp")
        return queue.get("status", {}).get("state") == "Open" and queue

    queue = wait_for(opened, what="Queue nlp Open")
    assert queue["spec"]["capability"]["nvidia.com/gpu"] == "16"


def test_one_job_runs_and_the_next_waits_in_volcanos_words(volcano_cluster, run_on_commit):
    world = build_real_world(volcano_cluster, "volcano", guaranteed=8, burst=0)
    first = submit(world, run_on_commit, name="first", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[first.pk].state == JobState.RUNNING, what="first running")
    second = submit(world, run_on_commit, name="second", workers=1, gpus_per_worker=8, kind="batch")
    rows = sync_until(world, lambda r: r[second.pk].state == JobState.QUEUED and r[second.pk].state_message,
                      what="second queued with Volcano's reason")
    assert rows[first.pk].state == JobState.RUNNING
    # proportion's enqueue refusal (pkg/scheduler/plugins/proportion), an Event on the PodGroup.
    assert rows[second.pk].state_message == "queue resource quota insufficient: insufficient nvidia.com/gpu"
    sentence = selectors.why_waiting(job=rows[second.pk])
    assert sentence.startswith("Waiting for 8 nvidia.com/gpu of flavor h100: team quota 8 guaranteed + 0 burst, "
                               "8 in use by 1 job. Scheduler: ")

    def in_use():
        reconcile.reconcile_sweep()
        [held] = quota_selectors.team_held_quotas(team=world["team"])
        return held.in_use == 8

    wait_for(in_use, what="8 in use from the cluster's status")
