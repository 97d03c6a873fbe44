"""In real headless Chromium against a sandbox cluster: a team admin switches the month's budget, already spent,
to "hold new work when spent"; the usage page says the team is held and why; the submit form warns before a job is
sent; the job, kept by the portal (Volcano's queue is closed), says on its page that the budget holds it, by how
much and who can lift it."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.utils import timezone

from billing.models import UsageHour
from billing.pricing import current_month
from jobs.choices import JobState
from jobs.models import Job
from portal import kube
from tenants.choices import Role
from tests.factories import MembershipFactory, RateCardFactory, UserFactory
from tests.jobs.conftest import build_world
from tests.test_browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_team_admin_sets_a_hard_budget_and_the_held_job_says_why(browser, live_server, sandbox):
    world = build_world(sandbox.url, "volcano", guaranteed=16, burst=0)
    team, flavor = world["team"], world["flavor"]
    MembershipFactory(team=team, role=Role.ADMIN, user=UserFactory(username="ada"))
    month = current_month()
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    RateCardFactory(flavor=flavor, price_per_gpu_hour=Decimal("10.00"), effective_from=start)
    UsageHour.objects.create(team=team, flavor=flavor, cluster=world["cluster"], namespace="nlp", hour=start,
                             allocated_gpu_hours=Decimal(20), used_gpu_hours=Decimal(20))
    base = live_server.url
    page = browser.new_page()
    login(page, base, "ada")
    page.goto(f"{base}/teams/nlp/usage/")
    page.fill("#budget-form input[name=amount]", "100")
    page.select_option("#budget-form select[name=mode]", "hold")
    page.click("#budget-form button[type=submit]")
    page.wait_for_selector("#budget-hold")
    held = page.inner_text("#budget-hold")
    assert f"nlp has spent 200.00 USD of its 100.00 USD hard budget for {month:%B %Y}, 100.00 USD over." in held
    assert "A team admin can raise the budget" in held

    page.goto(f"{base}/teams/nlp/jobs/new/batch/")
    assert "held by the budget" in page.inner_text("#budget-hold-warning")
    page.fill("input[name=name]", "train")
    page.fill("input[name=gpus_per_worker]", "4")
    page.select_option("select[name=flavor]", str(flavor.pk))
    page.fill("input[name=image]", "ghcr.io/acme/train:1.2")
    page.click("button[name=submit]")
    page.wait_for_selector("#why-waiting")
    why = page.inner_text("#why-waiting")
    assert why.startswith("The team's budget holds this job (the portal keeps it until the hold lifts).")
    assert "100.00 USD over" in why and "a platform admin can grant an override" in why
    job = Job.objects.get(name="train")
    assert job.state == JobState.PENDING and job.submitted_at <= timezone.now()
    page.close()
    kube.forget_clients()
