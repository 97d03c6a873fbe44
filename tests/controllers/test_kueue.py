"""The portal on the real Kueue: queues applied from an approved quota, a job admitted and running, a job waiting
for quota in Kueue's own words, the quota page's in-use figure from Kueue's status, and priority preemption."""

import re

import pytest

from composition import reconcile
from jobs import selectors
from jobs.choices import JobState
from portal import kube
from quotas import selectors as quota_selectors
from tests.controllers.conftest import add_team, build_real_world, sync_until, wait_for
from tests.jobs.test_simulated import submit

pytestmark = [pytest.mark.controllers, pytest.mark.django_db(transaction=True)]


def conditions(obj: dict) -> dict[str, dict]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


def test_an_approved_quota_becomes_queues_that_kueue_makes_active(kueue_cluster):
    world = build_real_world(kueue_cluster, "kueue")
    client = kube.client_for_cluster(world["cluster"])

    def active(kind, namespace=None):
        obj = client.get("kueue.x-k8s.io/v1beta2", kind, "nlp", namespace=namespace)
        return conditions(obj).get("Active", {}).get("status") == "True" and obj

    cluster_queue = wait_for(lambda: active("ClusterQueue"), what="ClusterQueue nlp Active")
    assert conditions(cluster_queue)["Active"]["reason"] == "Ready"
    assert wait_for(lambda: active("LocalQueue", "nlp"), what="LocalQueue nlp/nlp Active")


def test_one_job_runs_and_the_next_waits_in_kueues_words(kueue_cluster, run_on_commit):
    world = build_real_world(kueue_cluster, "kueue", guaranteed=8, burst=0)
    first = submit(world, run_on_commit, name="first", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[first.pk].state in (JobState.ADMITTED, JobState.RUNNING), what="first admitted")
    second = submit(world, run_on_commit, name="second", workers=1, gpus_per_worker=8, kind="batch")
    rows = sync_until(world, lambda r: r[second.pk].state == JobState.QUEUED and r[second.pk].state_message,
                      what="second queued with Kueue's reason")
    assert rows[first.pk].state in (JobState.ADMITTED, JobState.RUNNING)
    # Kueue's scheduler words (pkg/scheduler/flavorassigner), as the simulator writes them.
    assert "insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed" in rows[second.pk].state_message
    sentence = selectors.why_waiting(job=rows[second.pk])
    assert sentence.startswith("Waiting for 8 nvidia.com/gpu of flavor h100: team quota 8 guaranteed + 0 burst, "
                               "8 in use by 1 job. Scheduler: ")
    # "In use" on the quota page is the ClusterQueue's flavorsUsage that Kueue wrote, as the sweep records it.
    def in_use():
        reconcile.reconcile_sweep()
        [held] = quota_selectors.team_held_quotas(team=world["team"])
        return held.in_use == 8

    wait_for(in_use, what="8 in use from Kueue's ClusterQueue status")


def test_a_higher_tier_preempts_within_the_team_and_the_victim_says_why(kueue_cluster, run_on_commit, mailoutbox):
    world = build_real_world(kueue_cluster, "kueue", guaranteed=8, burst=0)
    low = submit(world, run_on_commit, name="cheap", workers=1, gpus_per_worker=8, kind="batch",
                 priority_tier=world["tiers"]["standard"])
    sync_until(world, lambda r: r[low.pk].state == JobState.RUNNING, what="cheap running")
    high = submit(world, run_on_commit, name="deadline", workers=1, gpus_per_worker=8, kind="batch",
                  priority_tier=world["tiers"]["urgent"])
    with run_on_commit():
        rows = sync_until(world, lambda r: r[low.pk].state == JobState.PREEMPTED
                          and r[high.pk].state in (JobState.ADMITTED, JobState.RUNNING), what="cheap preempted")
    # preemptionMessage (pkg/scheduler/preemption/preemption.go): the preemptor's UIDs and paths.
    assert re.fullmatch(r"Preempted to accommodate a workload \(UID: [-0-9a-f]+, JobUID: [-0-9a-f]+\) due to "
                        r"prioritization in the ClusterQueue; preemptor path: /nlp; preemptee path: /nlp",
                        rows[low.pk].state_message), rows[low.pk].state_message
    assert [m.subject for m in mailoutbox] == ["Job cheap preempted"]


def test_borrowing_in_the_cohort_and_its_reclaim(kueue_cluster, run_on_commit):
    """nlp borrows vision's unused 8 GPUs; when vision submits, Kueue reclaims them (reclaimWithinCohort Any)."""
    world = build_real_world(kueue_cluster, "kueue", guaranteed=8, burst=8)
    vision = add_team(world, "vision", guaranteed=8, burst=0)
    mine = submit(world, run_on_commit, name="base", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[mine.pk].state == JobState.RUNNING, what="base running")
    borrowing = submit(world, run_on_commit, name="burst", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[borrowing.pk].state == JobState.RUNNING, what="burst running on borrowed GPUs")
    theirs = submit(vision, run_on_commit, name="own", workers=1, gpus_per_worker=8, kind="batch")
    with run_on_commit():
        rows = sync_until(world, lambda r: r[borrowing.pk].state == JobState.PREEMPTED
                          and r[theirs.pk].state in (JobState.ADMITTED, JobState.RUNNING), what="burst reclaimed")
    assert rows[mine.pk].state == JobState.RUNNING
    assert re.fullmatch(r"Preempted to accommodate a workload \(UID: [-0-9a-f]+, JobUID: [-0-9a-f]+\) due to "
                        r"reclamation within the cohort; preemptor path: /gpu/vision; preemptee path: /gpu/nlp",
                        rows[borrowing.pk].state_message), rows[borrowing.pk].state_message
