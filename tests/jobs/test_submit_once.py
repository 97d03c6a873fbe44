"""A job form that says everything wrong at once and what its name becomes, and an API that does not ask a
one-team user which team."""

import html
import re

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework.test import APIClient

from jobs.models import Job
from tenants.choices import Role
from tests.factories import MembershipFactory, TeamFactory
from tests.jobs.test_services import submit, world  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode())))


def test_the_service_reports_every_problem_at_once(world):  # noqa: F811
    with pytest.raises(ValidationError) as refused:
        submit(world, kind="ray", command=[], image="not an image", workers=9, gpus_per_worker=4)
    assert {"command", "image", "workers"} <= set(refused.value.message_dict)


def test_the_form_reports_its_own_errors_and_the_feasibility_check_together(world):  # noqa: F811
    client = Client()
    client.force_login(world["member"])
    response = client.post("/teams/nlp/jobs/new/pytorch/", {
        "flavor": world["flavor"].pk, "name": "Bad Name", "image": "ghcr.io/acme/train:1", "command": "python x.py",
        "workers": 9, "gpus_per_worker": 4, "cpu_per_worker": 4, "memory_gib_per_worker": 32,
        "priority_tier": world["tier"].pk, "max_runtime_minutes": 60, "submit": "1"})
    assert response.status_code == 400
    page = text(response)
    assert "Lowercase letters, digits and '-'" in page and "it could never start" in page


def test_a_name_starting_with_a_digit_is_said_to_become_its_object_name(world):  # noqa: F811
    client = Client()
    client.force_login(world["member"])
    response = client.post("/teams/nlp/jobs/new/batch/", {
        "flavor": world["flavor"].pk, "name": "1st-run", "image": "ghcr.io/acme/train:1", "command": "python x.py",
        "workers": 1, "gpus_per_worker": 1, "cpu_per_worker": 4, "memory_gib_per_worker": 32,
        "priority_tier": world["tier"].pk, "max_runtime_minutes": 60, "submit": "1", "notify": "on"}, follow=True)
    job = Job.objects.get(name="1st-run")
    assert f"Its objects are named {job.object_name}" in text(response)
    assert job.object_name.startswith("x-1st-run-")


def test_the_api_needs_no_team_from_someone_who_submits_for_one(world):  # noqa: F811
    api = APIClient()
    api.force_authenticate(world["member"])
    body = {"kind": "batch", "name": "eval", "flavor": "h100", "image": "ghcr.io/acme/eval:1",
            "command": ["python", "eval.py"], "workers": 1, "gpus_per_worker": 1}
    created = api.post("/api/v1/jobs/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["team"] == "nlp"
    MembershipFactory(team=TeamFactory(slug="vision"), user=world["member"], role=Role.MEMBER)
    several = api.post("/api/v1/jobs/", body, format="json")
    assert several.status_code == 400 and "team" in several.content.decode()


def test_the_cost_estimate_sentence():
    from decimal import Decimal

    from jobs.cost import estimate_sentence

    assert estimate_sentence(units=16, price=(Decimal("2.20"), "USD"), max_runtime_minutes=1440) == \
        "About 35.20 USD per hour at today's rates, 845 USD at its runtime limit."
    assert estimate_sentence(units=1, price=None, max_runtime_minutes=60) == ""


def test_the_submit_form_prices_the_job_at_todays_rate(world):  # noqa: F811
    from decimal import Decimal

    from billing.pricing import month_bounds
    from tests.factories import RateCardFactory

    start = month_bounds(__import__("billing.selectors", fromlist=["x"]).current_month())[0]
    RateCardFactory(flavor=world["flavor"], price_per_gpu_hour=Decimal("2.00"), effective_from=start)
    client = Client()
    client.force_login(world["member"])
    response = client.post("/teams/nlp/jobs/new/pytorch/", {
        "flavor": world["flavor"].pk, "name": "train", "image": "ghcr.io/acme/train:1", "command": "python x.py",
        "workers": 2, "gpus_per_worker": 4, "cpu_per_worker": 4, "memory_gib_per_worker": 32,
        "priority_tier": world["tier"].pk, "max_runtime_minutes": 600, "preview": "1"})
    assert "About 16.00 USD per hour at today's rates, 160 USD at its runtime limit." in text(response)
