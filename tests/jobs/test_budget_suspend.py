"""A budget hold and running jobs, end to end on the sandbox for both schedulers: on a tier that says "suspend",
the submitter is told when the hold starts, the job is stopped and resubmitted BUDGET_HOLD_SUSPEND_MINUTES later
(the copy waits behind the hold), and the copy runs once the hold lifts; a job of a tier that keeps running does."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from billing import budgets, enforce
from billing.models import BudgetHold, UsageHour
from billing.pricing import floor_hour
from jobs import sync as job_sync
from jobs.choices import JobState
from jobs.models import Job
from tenants.choices import BudgetHoldAction
from tenants.models import AuditEvent, PriorityTier, TeamWebhook, WebhookDelivery
from tests.api.world import token_for
from tests.factories import PlatformAdminFactory
from tests.jobs.conftest import build_world, step

pytestmark = pytest.mark.django_db


def submit(world, name: str, tier: str) -> Job:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(world['member'])}")
    response = client.post("/api/v1/jobs/", {
        "team": "nlp", "kind": "batch", "name": name, "flavor": "h100", "image": "ghcr.io/acme/train:2",
        "command": ["python", "train.py"], "workers": 1, "gpus_per_worker": 4, "priority": tier}, format="json")
    assert response.status_code == 201, response.content
    return Job.objects.get(pk=response.json()["id"])


def state(job: Job) -> str:
    job.refresh_from_db()
    return job.state


def runs(job: Job) -> bool:
    return state(job) in (JobState.ADMITTED, JobState.RUNNING)


@pytest.mark.parametrize("scheduler", ["kueue", "volcano"])
def test_a_hold_suspends_a_suspending_tiers_running_job_with_notice_and_it_runs_again_when_the_hold_lifts(
        scheduler, simulating_sandbox, run_on_commit, mailoutbox, settings):
    settings.BUDGET_HOLD_SUSPEND_MINUTES = 15
    sb = simulating_sandbox
    world = build_world(sb.url, scheduler, guaranteed=16, burst=0)
    admin = PlatformAdminFactory()
    world["tiers"]["preemptible"].budget_hold_action = BudgetHoldAction.SUSPEND
    world["tiers"]["preemptible"].save()
    TeamWebhook.objects.create(team=world["team"], url="https://hooks.example.com/gpu", secret="s3cret")
    with run_on_commit():
        sweep = submit(world, "sweep", "preemptible")
        train = submit(world, "train", "standard")
    step(sb, 0)
    step(sb, 1)
    job_sync.job_status_sync(cluster=world["cluster"])
    assert runs(sweep) and runs(train)

    now = timezone.now()
    UsageHour.objects.create(team=world["team"], flavor=world["flavor"], cluster=world["cluster"], namespace="nlp",
                             hour=floor_hour(now) - timedelta(hours=1), allocated_gpu_hours=Decimal(10),
                             used_gpu_hours=Decimal(10))
    with run_on_commit():  # the team's queue lists the budget check, and the pass on commit opens the hold
        budgets.allowance_set(actor=admin, team=world["team"], flavor=world["flavor"], gpu_hours=8, window_days=1)
    now = BudgetHold.objects.get(team=world["team"], ended_at__isnull=True).started_at
    notice = [m for m in mailoutbox if m.subject == "Job sweep will be suspended by the budget"]
    assert len(notice) == 1 and notice[0].to == [world["member"].email]
    assert f"suspended at {now + timedelta(minutes=15):%H:%M} UTC unless the hold lifts" in notice[0].body
    assert not [m for m in mailoutbox if "train" in m.subject]  # its tier keeps running jobs running
    assert WebhookDelivery.objects.get(event="job.suspend_notice").payload["job"]["id"] == sweep.pk

    with run_on_commit():
        assert enforce.budget_enforce(now=now + timedelta(minutes=10))["suspended"] == 0  # notice still running
    with run_on_commit():
        assert enforce.budget_enforce(now=now + timedelta(minutes=16))["suspended"] == 1
    step(sb, 2)  # the copy reaches the scheduler's door (Kueue: quota reserved, the check to decide)
    with run_on_commit():
        assert enforce.budget_enforce(now=now + timedelta(minutes=17))["suspended"] == 0  # once
    job_sync.job_status_sync(cluster=world["cluster"])
    assert state(sweep) == JobState.CANCELLED and runs(train)
    again = Job.objects.get(resubmit_of=sweep)
    assert sweep.state_message.startswith(f"Suspended by the team's budget hold and resubmitted as job {again.pk}, "
                                          "which starts when the hold lifts. Held by the budget's GPU-hour allowance")
    assert len(sweep.state_message) <= 300
    assert (again.name, again.priority_tier.name, again.submitted_by) == ("sweep", "preemptible", world["member"])
    assert state(again) in (JobState.PENDING, JobState.QUEUED)  # behind the hold: in the portal or the scheduler
    assert again.state_message.startswith("Held by the budget")
    assert [m.subject for m in mailoutbox if m.subject.startswith("Job sweep suspended")] == [
        "Job sweep suspended by the budget"]
    assert WebhookDelivery.objects.get(event="job.suspended").payload["job"]["id"] == sweep.pk
    event = AuditEvent.objects.get(action="job.budget_suspend")
    assert event.after["resubmitted_as"] == again.pk

    with run_on_commit():
        budgets.budget_override_grant(actor=admin, team=world["team"], expires_at=now + timedelta(hours=6),
                                      reason="finish the sweep")
        enforce.budget_enforce(now=now + timedelta(minutes=18))
    step(sb, 3)
    step(sb, 4)
    job_sync.job_status_sync(cluster=world["cluster"])
    assert runs(again)


def test_a_hold_that_lifts_before_the_notice_runs_out_suspends_nothing(simulating_sandbox, run_on_commit, settings):
    settings.BUDGET_HOLD_SUSPEND_MINUTES = 15
    sb = simulating_sandbox
    world = build_world(sb.url, "kueue", guaranteed=16, burst=0)
    admin = PlatformAdminFactory()
    world["tiers"]["preemptible"].budget_hold_action = BudgetHoldAction.SUSPEND
    world["tiers"]["preemptible"].save()
    with run_on_commit():
        sweep = submit(world, "sweep", "preemptible")
    step(sb, 0)
    step(sb, 1)
    job_sync.job_status_sync(cluster=world["cluster"])
    now = timezone.now()
    UsageHour.objects.create(team=world["team"], flavor=world["flavor"], cluster=world["cluster"], namespace="nlp",
                             hour=floor_hour(now) - timedelta(hours=1), allocated_gpu_hours=Decimal(10),
                             used_gpu_hours=Decimal(10))
    with run_on_commit():
        allowance = budgets.allowance_set(actor=admin, team=world["team"], flavor=world["flavor"], gpu_hours=8,
                                          window_days=1)
    assert BudgetHold.objects.filter(team=world["team"], ended_at__isnull=True).exists()
    with run_on_commit():
        budgets.allowance_delete(actor=admin, allowance=allowance)
    assert enforce.budget_enforce(now=now + timedelta(minutes=16))["suspended"] == 0
    assert runs(sweep) and not Job.objects.filter(resubmit_of=sweep).exists()


def test_platform_admins_set_a_tiers_budget_hold_action_on_the_console(client):
    client.force_login(PlatformAdminFactory())
    response = client.post("/console/tiers/", {"name": "spare", "value": 10, "preemption_policy": "Never",
                                               "budget_hold_action": "suspend"})
    assert response.status_code == 302
    assert PriorityTier.objects.get(name="spare").budget_hold_action == BudgetHoldAction.SUSPEND
    page = client.get("/console/tiers/").content.decode()
    assert "Running jobs when the team&#x27;s budget holds" in page
    assert "Budget holds: running jobs suspended with notice." in page
    bad = client.post("/console/tiers/", {"name": "odd", "value": 10, "preemption_policy": "Never",
                                          "budget_hold_action": "stop"})
    assert bad.status_code == 200 and "Select a valid choice" in bad.content.decode()
    assert not PriorityTier.objects.filter(name="odd").exists()
