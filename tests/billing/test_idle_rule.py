"""The idle rule for batch jobs, per priority tier, against a sandbox that runs them: a tier that says "suspend"
has its idle job warned and then stopped (quota freed, the reason as its final message); "warn" only warns; a tier
that says nothing is left alone, as is a job whose GPUs work. E-mails and the team's webhook carry each step."""

from datetime import timedelta

import pytest
from django.utils import timezone

from billing.idle_rule import STOPPED, WARNED, job_idle_rule_all
from jobs.choices import JobState
from jobs.models import Job
from portal import kube
from tenants.choices import IdleAction
from tenants.models import PriorityTier
from tenants.records import AuditEvent
from tests.jobs.conftest import build_world
from tests.jobs.test_simulated import submit
from tests.workspaces.test_simulated import hooked, receiver, set_activity, signed, step, sync  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def sandbox():
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=None, simulation={"duration": 10**7, "startup": 5}) as sb:
        yield sb
    kube.forget_clients()


class Run:
    """What set_activity needs of a job: the id its pods are labelled with."""

    def __init__(self, job):
        self.run_id = job.pk


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_idle_jobs_are_warned_then_stopped_per_tier(sandbox, run_on_commit, settings, mailoutbox, receiver,  # noqa: F811
                                                     backend):
    settings.JOB_IDLE_WARN_MINUTES, settings.JOB_IDLE_STOP_MINUTES = 30, 15
    world = build_world(sandbox.url, backend, guaranteed=16, burst=0)
    PriorityTier.objects.filter(name="preemptible").update(idle_action=IdleAction.SUSPEND)
    PriorityTier.objects.filter(name="standard").update(idle_action=IdleAction.WARN)
    secret = hooked(world, receiver)
    jobs = {tier: submit(world, run_on_commit, kind="batch", name=f"{tier}-job", workers=1, gpus_per_worker=4,
                         priority_tier=world["tiers"][tier]) for tier in ("preemptible", "standard", "urgent")}
    busy = submit(world, run_on_commit, kind="batch", name="busy-job", workers=1, gpus_per_worker=4,
                  priority_tier=world["tiers"]["preemptible"])
    step(sandbox, 0)
    step(sandbox, 10)
    sync(world, run_on_commit)
    assert {j.state for j in Job.objects.all()} == {JobState.RUNNING}
    for job in jobs.values():
        set_activity(world, Run(job), "idle")
    set_activity(world, Run(busy), "busy")

    now = timezone.now()

    def rule(minutes):
        with run_on_commit():
            return job_idle_rule_all(now=now + timedelta(minutes=minutes))

    assert rule(0) == {"read": 3, "moved": {}, "failed": {}}  # the urgent tier is not watched at all
    assert rule(31)["moved"] == {jobs["preemptible"].pk: WARNED, jobs["standard"].pk: WARNED}
    assert rule(40)["moved"] == {}
    assert rule(47)["moved"] == {jobs["preemptible"].pk: STOPPED}
    assert rule(120)["moved"] == {}  # warned once; "warn" never stops

    stopped = Job.objects.get(pk=jobs["preemptible"].pk)
    assert stopped.cancel_requested_at and stopped.cancel_reason.startswith("Stopped by the idle rule")
    step(sandbox, 20)
    sync(world, run_on_commit)
    stopped.refresh_from_db()
    assert stopped.state == JobState.CANCELLED and stopped.state_message.startswith("Stopped by the idle rule")
    assert Job.objects.get(pk=jobs["standard"].pk).state == JobState.RUNNING
    assert Job.objects.get(pk=busy.pk).state == JobState.RUNNING
    assert sorted(m.subject for m in mailoutbox) == ["Job preemptible-job is idle", "Job preemptible-job stopped: idle",
                                                    "Job standard-job is idle"]
    assert sorted(c["json"]["event"] for c in receiver.calls) == ["job.idle_stopped", "job.idle_warned",
                                                                  "job.idle_warned"]
    assert all(signed(call, secret) for call in receiver.calls)
    warned = AuditEvent.objects.get(action="job.idle_warn", object_id=str(jobs["standard"].pk))
    assert warned.after["activity"]["idle"] is True and "does no work" in warned.after["reason"]
