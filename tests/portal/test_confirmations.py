"""Destructive actions from pages ask first, with or without JavaScript: a post without `confirmed=1` (a browser
without the dialog) answers a confirmation page that states what will happen and changes nothing; the same post
with `confirmed=1` (the dialog's, or the page's "Yes, …") acts. A refusal is the same either way."""

import html
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.test import Client
from django.urls import reverse

from jobs.choices import JobState
from jobs.models import Job
from quotas.choices import RequestState
from tenants.choices import Role, TeamState
from tenants.models import AuditEvent, Membership, Team
from tenants.tokens import access_token_create
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    UserFactory,
)
from tests.quotas.factories import QuotaRequestFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    cluster = ClusterFactory()
    flavor = GpuFlavorFactory(cluster=cluster, name="h100")
    team = TeamFactory(slug="nlp", name="Natural Language")
    admin = MembershipFactory(team=team, role=Role.ADMIN, user=UserFactory(username="ada")).user
    member = MembershipFactory(team=team, role=Role.MEMBER, user=UserFactory(username="erin")).user
    job = Job.objects.create(team=team, cluster=cluster, flavor=flavor, kind="pytorch", name="bert-large",
                             image="ghcr.io/acme/train:1", submitted_by=member, state=JobState.RUNNING, workers=2,
                             gpus_per_worker=4, priority_tier=PriorityTierFactory(name="standard", value=1000))
    request = QuotaRequestFactory(team=team, flavor=flavor, requested_by=member)
    token, _ = access_token_create(actor=member, name="notebook")
    return {"team": team, "admin": admin, "member": member, "job": job, "request": request, "token": token,
            "staff": PlatformAdminFactory()}


@dataclass(frozen=True)
class Action:
    actor: str
    url: Callable
    data: dict
    says: tuple  # the question, the consequence and the Yes button
    done: Callable  # whether the action happened

    def post(self, world, **extra):
        client = Client()
        client.force_login(world[self.actor])
        return client.post(self.url(world), {**self.data, **extra})


ACTIONS = {
    "cancel a job": Action(
        "member", lambda w: reverse("jobs:job-action", args=[w["job"].pk, "cancel"]), {},
        ("Cancel job bert-large?", "8 GPUs will be released: its 2 workers are stopped", "Yes, cancel the job"),
        lambda w: Job.objects.get(pk=w["job"].pk).cancel_requested_at is not None),
    "withdraw a request": Action(
        "member", lambda w: reverse("quotas:request-withdraw", args=[w["request"].pk]), {},
        ("Withdraw request #", "The platform team will not decide on it", "Yes, withdraw it"),
        lambda w: w["request"].__class__.objects.get(pk=w["request"].pk).state == RequestState.WITHDRAWN),
    "revoke a token": Action(
        "member", lambda w: reverse("tenants:token-revoke", args=[w["token"].pk]), {},
        ("Revoke token “notebook”?", "stops working at once", "Yes, revoke it"),
        lambda w: w["token"].__class__.objects.get(pk=w["token"].pk).revoked_at is not None),
    "remove a member": Action(
        "admin", lambda w: reverse("tenants:membership-remove", args=["nlp"]), {"username": "erin"},
        ("Remove erin from Natural Language?", "erin can no longer see the team's jobs", "Yes, remove erin"),
        lambda w: not Membership.objects.filter(team=w["team"], user=w["member"]).exists()),
    "suspend a team": Action(
        "staff", lambda w: reverse("tenants:team-set-state", args=["nlp"]), {"state": "suspended"},
        ("Suspend Natural Language?", "Nothing new is admitted for the team", "Yes, suspend it"),
        lambda w: Team.objects.get(pk=w["team"].pk).state == TeamState.SUSPENDED),
    "archive a team": Action(
        "staff", lambda w: reverse("tenants:team-set-state", args=["nlp"]), {"state": "archived"},
        ("Archive Natural Language?", "the team's quota no longer counts", "Yes, archive it"),
        lambda w: Team.objects.get(pk=w["team"].pk).state == TeamState.ARCHIVED),
}


@pytest.mark.parametrize("name", ACTIONS)
def test_unconfirmed_post_asks_and_changes_nothing_then_yes_acts(world, name):
    action = ACTIONS[name]
    audited = AuditEvent.objects.count()
    asked = action.post(world)
    body = asked.content.decode()
    page = html.unescape(body)
    assert asked.status_code == 200 and 'id="confirm-page"' in body
    assert all(words in page for words in action.says), page
    # The page posts the same fields back to the same URL, with confirmed=1.
    assert f'action="{action.url(world)}"' in body and '<input type="hidden" name="confirmed" value="1">' in body
    assert all(f'name="{key}" value="{value}"' in body for key, value in action.data.items())
    assert not action.done(world) and AuditEvent.objects.count() == audited

    acted = action.post(world, confirmed="1")
    assert acted.status_code == 302 and action.done(world)
    assert AuditEvent.objects.count() == audited + 1


def test_a_refused_action_is_refused_before_asking(world):
    audited = AuditEvent.objects.count()
    viewer = MembershipFactory(team=world["team"], role=Role.VIEWER).user
    client = Client()
    client.force_login(viewer)
    assert client.post(reverse("jobs:job-action", args=[world["job"].pk, "cancel"])).status_code == 403
    Job.objects.filter(pk=world["job"].pk).update(state=JobState.SUCCEEDED)
    client.force_login(world["member"])
    response = client.post(reverse("jobs:job-action", args=[world["job"].pk, "cancel"]), follow=True)
    page = html.unescape(response.content.decode())
    assert 'id="confirm-page"' not in page and "The job has already succeeded." in page
    # The last admin is not offered a confirmation to remove themselves: the team page says why not.
    client.force_login(world["admin"])
    response = client.post(reverse("tenants:membership-remove", args=["nlp"]), {"username": "ada"})
    assert response.status_code == 200 and "A team keeps at least one admin." in response.content.decode()
    assert AuditEvent.objects.count() == audited


def test_the_api_acts_without_a_confirmation(world):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(world["member"])
    assert api.post(f"/api/v1/jobs/{world['job'].pk}/cancel/").status_code in (200, 202)
    assert ACTIONS["cancel a job"].done(world)
