"""Fine-grained tokens, in the shared permission style: a read-only token reads (200) and is refused every write
(403); a token limited to some teams finds another of its owner's teams as it finds a stranger's (404); a
platform admin's limited token is no platform admin; an expired one is no token (401)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.choices import Role
from tenants.models import AccessToken
from tenants.services import access_token_create
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_a_read_only_token_reads_and_never_writes(world):
    api = bearer(access_token_create(actor=world.member, name="dashboard", read_only=True)[1])
    job = world.job
    for url in ("/api/v1/me/", "/api/v1/jobs/", f"/api/v1/jobs/{job.pk}/", "/api/v1/teams/nlp/quotas/",
                "/api/v1/quota-requests/", f"/api/v1/jobs/{job.pk}/yaml/"):
        assert api.get(url).status_code == 200, url
    writes = [("post", f"/api/v1/jobs/{job.pk}/cancel/", None),
              ("post", "/api/v1/jobs/", {"team": "nlp", "kind": "batch", "name": "x", "flavor": "h100",
                                         "image": "ghcr.io/acme/x:1", "command": ["x"]}),
              ("post", f"/api/v1/quota-requests/{world.quota_request.pk}/withdraw/", None)]
    for method, url, body in writes:
        response = getattr(api, method)(url, body, format="json")
        assert response.status_code == 403, (url, response.status_code)
        assert "read-only" in response.content.decode()
    job.refresh_from_db()
    assert job.cancel_requested_at is None
    # The same user with a read-write token may.
    assert bearer(access_token_create(actor=world.member, name="cli")[1]).post(
        f"/api/v1/jobs/{job.pk}/cancel/").status_code in (200, 202)


def test_a_token_limited_to_one_team_acts_in_that_team_only(world):
    MembershipFactory(team=world.other_team, user=world.member, role=Role.MEMBER)
    everywhere = bearer(access_token_create(actor=world.member, name="all")[1])
    assert everywhere.get(f"/api/v1/jobs/{world.other_job.pk}/").status_code == 200
    limited = bearer(access_token_create(actor=world.member, name="nlp only", teams=[world.team])[1])
    assert limited.get(f"/api/v1/jobs/{world.job.pk}/").status_code == 200
    assert limited.get(f"/api/v1/jobs/{world.other_job.pk}/").status_code == 404  # as another team's would be
    assert limited.get("/api/v1/teams/vision/").status_code == 404
    assert [t["slug"] for t in limited.get("/api/v1/teams/").json()["results"]] == ["nlp"]
    assert {j["team"] for j in limited.get("/api/v1/jobs/").json()["results"]} == {"nlp"}
    submit = {"team": "vision", "kind": "batch", "name": "x", "flavor": "h100", "image": "ghcr.io/acme/x:1",
              "command": ["x"]}
    assert limited.post("/api/v1/jobs/", submit, format="json").status_code == 404
    assert everywhere.post("/api/v1/jobs/", submit, format="json").status_code == 201


def test_a_platform_admins_limited_token_is_no_platform_admin(world):
    MembershipFactory(team=world.team, user=world.platform_admin, role=Role.VIEWER)
    full = bearer(access_token_create(actor=world.platform_admin, name="ops")[1])
    limited = bearer(access_token_create(actor=world.platform_admin, name="nlp", teams=[world.team])[1])
    url = f"/api/v1/quota-requests/{world.quota_request.pk}/impact/"
    assert full.get(url).status_code == 200
    assert limited.get(url).status_code in (403, 404)
    assert limited.get(f"/api/v1/jobs/{world.other_job.pk}/").status_code == 404


def test_a_token_is_limited_only_to_its_owners_teams_and_expires(world):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        access_token_create(actor=world.member, name="not mine", teams=[world.other_team])
    token, raw = access_token_create(actor=world.member, name="short", expires_in_days=1, read_only=True)
    AccessToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert bearer(raw).get("/api/v1/me/").status_code == 401


def test_the_tokens_page_creates_a_scoped_token(client, world):
    client.force_login(world.member)
    response = client.post("/tokens/", {"name": "ci", "expires_in_days": "30", "access": "read",
                                        "teams": [world.team.pk]}, follow=True)
    token = AccessToken.objects.get(user=world.member, name="ci")
    assert token.read_only and token.team_ids == [world.team.pk]
    page = response.content.decode()
    assert "read only · nlp" in " ".join(page.split())
    assert client.post("/tokens/", {"name": "x", "access": "read", "teams": [world.other_team.pk]}).status_code == 400
