"""The team's webhook page: team admins set the address (refused with the reason when it is internal), see the
secret once, and see how the latest notices went; members get a 403."""

import pytest
from django.test import Client

from tenants.choices import Role
from tenants.models import TeamWebhook, WebhookDelivery
from tests.factories import MembershipFactory, TeamFactory

pytestmark = pytest.mark.django_db


def test_admins_set_the_webhook_and_see_the_secret_once(settings):
    team = TeamFactory(slug="nlp")
    admin = MembershipFactory(team=team, role=Role.ADMIN).user
    client = Client()
    client.force_login(admin)
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    refused = client.post("/teams/nlp/webhook/", {"url": "http://169.254.169.254/latest/"})
    assert "link-local address" in refused.content.decode() and not TeamWebhook.objects.exists()
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    saved = client.post("/teams/nlp/webhook/", {"url": "http://10.0.0.5/hooks"})
    secret = TeamWebhook.objects.get().secret
    assert secret in saved.content.decode() and "no-store" in saved["Cache-Control"]
    WebhookDelivery.objects.create(team=team, event="job.preempted", payload={}, url="http://10.0.0.5/hooks",
                                   attempts=2, status_code=503, error="Service Unavailable")
    page = client.get("/teams/nlp/webhook/").content.decode()
    assert secret not in page and "job.preempted" in page and "Service Unavailable" in page
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    client.force_login(member)
    assert client.get("/teams/nlp/webhook/").status_code == 403
