"""A job's wait is recorded stretch by stretch with its reason, as the status sync sees the state change."""

from datetime import UTC, datetime, timedelta

import pytest

from backends.observe import Observed
from jobs import sync
from jobs.models import Job, JobWait
from jobs.waits import wait_reason
from tests.factories import GpuFlavorFactory, PriorityTierFactory, TeamFactory, UserFactory

T0 = datetime(2026, 6, 1, 9, tzinfo=UTC)


@pytest.mark.parametrize(("state", "message", "reason"), [
    ("queued", "", "quota"),
    ("queued", "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu", "quota"),
    ("queued", 'couldn\'t assign flavors to pod set main: topology "default" doesn\'t allow to fit', "placement"),
    ("queued", "0/4 tasks in gang unschedulable: pod group is not ready", "placement"),
    ("queued", "Exceeded the PodsReady timeout nlp/job-train-1-3f2a1", "placement"),
    # Past Volcano's enqueue, but the team's ResourceQuota refused the worker's device claim: quota.
    ("queued", "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 "
               "Unschedulable. Origin reason is x-main-0: 0/2 nodes are unavailable: 2 plugin DynamicResources "
               'pre-predicates failed pod "nlp/x-main-0": ResourceClaim not created yet.', "quota"),
    ("pending", "Held: the team's monthly budget is spent", "budget"),
    ("running", "", None),
    ("succeeded", "", None),
])
def test_reason_from_the_schedulers_words(state, message, reason):
    assert wait_reason(state, message) == reason


@pytest.mark.django_db
def test_the_sync_opens_and_closes_waits():
    flavor = GpuFlavorFactory()
    job = Job.objects.create(team=TeamFactory(), cluster=flavor.cluster, flavor=flavor, kind="batch", name="train",
                             priority_tier=PriorityTierFactory(name="standard"), image="ghcr.io/acme/train:1",
                             submitted_by=UserFactory(), submitted_at=T0, state="pending")
    placement = 'couldn\'t assign flavors to pod set main: topology "default" doesn\'t allow to fit'
    sync.set_state(job, Observed("queued", "insufficient unused quota"), T0 + timedelta(minutes=1))
    sync.set_state(job, Observed("queued", placement), T0 + timedelta(minutes=5))
    sync.set_state(job, Observed("running"), T0 + timedelta(minutes=9))
    waits = list(JobWait.objects.filter(job=job).order_by("started_at").values_list("reason", "started_at", "ended_at"))
    # Pending and then queued for quota is one quota wait from submission, which the timeline already says;
    # what it does not say is the placement stretch.
    assert waits == [("placement", T0 + timedelta(minutes=5), T0 + timedelta(minutes=9))]
    sync.set_state(job, Observed("preempted", "Preempted"), T0 + timedelta(minutes=20))
    sync.set_state(job, Observed("queued", ""), T0 + timedelta(minutes=21))
    assert JobWait.objects.filter(job=job, reason="quota", ended_at__isnull=True).count() == 1  # waits again
