"""Personal access tokens: stored hashed, shown once, expiry and revocation, last-used without a write per request,
per-token throttling, CSRF for session writes, the issue_token command and the Tokens page."""

import hashlib
import logging
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import AccessToken, AuditEvent
from tenants.services import access_token_create, access_token_revoke
from tests.factories import UserFactory
from tests.permissions import assert_page_permissions, request_as

pytestmark = pytest.mark.django_db
ME = "/api/v1/me/"


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_token_is_stored_as_a_hash_and_its_creation_audited():
    user = UserFactory(username="erin")
    token, raw = access_token_create(actor=user, name="notebook", expires_in_days=30, source_ip="203.0.113.7")
    assert raw.startswith(f"gpp_{token.prefix}_") and len(raw) == 58
    stored = AccessToken.objects.get(pk=token.pk)
    assert stored.digest == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in str(list(AccessToken.objects.values()))
    assert abs((stored.expires_at - timezone.now()) - timedelta(days=30)) < timedelta(minutes=1)
    event = AuditEvent.objects.get(action="token.create")
    assert (event.actor, event.source_ip, event.after["prefix"]) == (user, "203.0.113.7", token.prefix)
    assert raw not in str(event.after) and raw not in event.object_repr


def test_bearer_token_authenticates_as_its_user():
    user = UserFactory(username="erin")
    _, raw = access_token_create(actor=user, name="notebook")
    response = bearer(raw).get(ME)
    assert response.status_code == 200
    assert response.json()["username"] == "erin"


@pytest.mark.parametrize("header", [
    None, "Bearer", "Bearer gpp_0123456789_x", "Bearer a b", "Token whatever",
    "Bearer gpp_0123456789_" + "A" * 43,  # well-formed, unknown prefix
])
def test_missing_or_bad_credentials_are_401_in_the_error_shape(header):
    UserFactory(username="erin")
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(ME)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    body = response.json()
    assert body["error"]["code"] == "not_authenticated" and body["error"]["message"]


def test_a_guessed_secret_with_a_real_prefix_is_refused():
    token, raw = access_token_create(actor=UserFactory(), name="notebook")
    forged = raw[:-4] + ("AAAA" if not raw.endswith("AAAA") else "BBBB")
    assert bearer(forged).get(ME).status_code == 401
    assert bearer(raw).get(ME).status_code == 200


def test_revoked_expired_and_inactive_user_tokens_are_refused():
    user = UserFactory()
    token, raw = access_token_create(actor=user, name="notebook", expires_in_days=1)
    assert bearer(raw).get(ME).status_code == 200
    AccessToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert bearer(raw).get(ME).status_code == 401

    token, raw = access_token_create(actor=user, name="second")
    access_token_revoke(actor=user, token=token)
    assert bearer(raw).get(ME).status_code == 401
    assert AuditEvent.objects.filter(action="token.revoke", object_id=str(token.pk)).count() == 1

    _, raw = access_token_create(actor=user, name="third")
    user.is_active = False
    user.save()
    assert bearer(raw).get(ME).status_code == 401


def test_a_token_is_read_in_one_query_with_its_user_and_teams_but_not_the_password_hash():
    from tenants.selectors import access_token_for_secret, visible_team_ids
    from tests.factories import MembershipFactory, PlatformAdminFactory

    user = UserFactory(username="erin", first_name="Erin")
    teams = [MembershipFactory(user=user).team, MembershipFactory(user=user).team]
    MembershipFactory()  # someone else's team
    token, raw = access_token_create(actor=user, name="notebook", expires_in_days=3)
    with CaptureQueriesContext(connection) as queries:
        found = access_token_for_secret(raw)
        assert sorted(visible_team_ids(user=found.user)) == sorted(t.pk for t in teams)
    assert len(queries) == 1
    assert (found.pk, found.name, found.expires_at, found.user.pk, found.user.first_name) == (
        token.pk, "notebook", AccessToken.objects.get(pk=token.pk).expires_at, user.pk, "Erin")
    assert found.user.get_deferred_fields() == {"password"}
    loner = UserFactory()
    assert visible_team_ids(user=access_token_for_secret(access_token_create(actor=loner, name="x")[1]).user) == []
    admin = PlatformAdminFactory()
    assert visible_team_ids(user=access_token_for_secret(access_token_create(actor=admin, name="x")[1]).user) is None


def test_only_the_owner_revokes_a_token():
    from django.core.exceptions import PermissionDenied

    token, _ = access_token_create(actor=UserFactory(), name="notebook")
    with pytest.raises(PermissionDenied):
        access_token_revoke(actor=UserFactory(), token=token)


@pytest.mark.parametrize("days", [0, -1, 367])
def test_expiry_out_of_range_is_refused(days):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as caught:
        access_token_create(actor=UserFactory(), name="notebook", expires_in_days=days)
    assert "expires_in_days" in caught.value.message_dict


def test_last_used_is_written_at_most_once_a_minute():
    token, raw = access_token_create(actor=UserFactory(), name="notebook")
    client = bearer(raw)
    assert client.get(ME).status_code == 200
    first = AccessToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        assert client.get(ME).status_code == 200
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert AccessToken.objects.get(pk=token.pk).last_used_at == first

    AccessToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    assert client.get(ME).status_code == 200
    assert AccessToken.objects.get(pk=token.pk).last_used_at > first - timedelta(seconds=1)


@override_settings(API_THROTTLE_RATE="3/day")  # a day-long window, so the calls never straddle two
def test_throttling_counts_per_token():
    user = UserFactory()
    _, raw = access_token_create(actor=user, name="busy script")
    _, other = access_token_create(actor=user, name="another script")
    busy = bearer(raw)
    assert [busy.get(ME).status_code for _ in range(3)] == [200, 200, 200]
    response = busy.get(ME)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "throttled"
    assert int(response["Retry-After"]) > 0
    assert bearer(other).get(ME).status_code == 200


def test_throttles_count_in_redis_in_one_round_trip_shared_by_every_worker(monkeypatch):
    """The production cache: a real Redis (REDIS_URL). Two cache objects stand for two web workers."""
    import os
    import uuid

    from django.core.cache import caches

    from portal.cache import RedisCache
    from tests.requires import unavailable

    url = os.environ.get("REDIS_URL", "")
    if not url.startswith("redis://"):
        unavailable("REDIS_URL is not set: the throttle's Redis counting is not tested")
    location = {"BACKEND": "portal.cache.RedisCache", "LOCATION": url, "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    with override_settings(CACHES={"default": location}, API_THROTTLE_RATE="3/day"):
        user = UserFactory()
        _, raw = access_token_create(actor=user, name="busy script")
        assert [bearer(raw).get(ME).status_code for _ in range(4)] == [200, 200, 200, 429]
        cache = caches["default"]
        redis = cache._cache.get_client(write=True)
        keys = list(redis.scan_iter(f"{location['KEY_PREFIX']}:*"))
        assert len(keys) == 1 and 0 < redis.ttl(keys[0]) <= 86401  # the window's counter expires with it
        other_worker = RedisCache(url, {"KEY_PREFIX": location["KEY_PREFIX"]})
        window_key = keys[0].decode().split(":", 2)[2]
        assert other_worker.incr_window(window_key, 86401) == 5  # the same count, not one of its own
        from redis.connection import Connection

        sends, send = [], Connection.send_packed_command
        monkeypatch.setattr(Connection, "send_packed_command", lambda self, *a, **k: sends.append(a) or send(
            self, *a, **k))
        assert (cache.incr_window("fresh", 60), cache.incr_window("fresh", 60)) == (1, 2)
        assert len(sends) == 2  # one round trip each: SET NX and INCR sent together
        monkeypatch.undo()
        redis.delete(*redis.scan_iter(f"{location['KEY_PREFIX']}:*"))


def test_session_writes_need_the_csrf_token(world):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.member)
    assert client.get(ME).status_code == 200
    body = {"team": "nlp", "flavor_id": world.flavor.pk, "guaranteed_units": 1,
            "justification": "A short experiment this week"}
    response = client.post("/api/v1/quota-requests/", body, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]["message"]


def test_tokens_never_reach_the_logs(caplog):
    _, raw = access_token_create(actor=UserFactory(), name="notebook")
    with caplog.at_level(logging.DEBUG):
        bearer(raw).get(ME)
        bearer(raw[:-1] + "x").get(ME)
        bearer(raw).get("/api/v1/jobs/999999/")
    assert caplog.records, "the requests above log (401 and 404 warnings); the check below must see them"
    assert raw[15:] not in caplog.text


# --- issue_token -----------------------------------------------------------------------------------------------


def test_issue_token_prints_a_working_token():
    UserFactory(username="erin")
    out, err = StringIO(), StringIO()
    call_command("issue_token", "erin", "--expires", "7", stdout=out, stderr=err)
    raw = out.getvalue().strip()
    assert bearer(raw).get(ME).json()["username"] == "erin"
    token = AccessToken.objects.get()
    assert token.expires_at is not None and raw not in err.getvalue()


def test_issue_token_refuses_unknown_users_and_bad_expiry():
    UserFactory(username="erin")
    with pytest.raises(CommandError, match="No active user"):
        call_command("issue_token", "nobody", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="Between 1 and"):
        call_command("issue_token", "erin", "--expires", "0", stdout=StringIO(), stderr=StringIO())


# --- the Tokens page -------------------------------------------------------------------------------------------


def test_tokens_page_creates_a_token_shown_once(client):
    user = UserFactory(username="erin")
    url = reverse("tenants:token-list")
    assert_page_permissions(client, url, allowed=[user])
    client.force_login(user)
    created = client.post(url, {"name": "notebook", "expires_in_days": "30"})
    assert created.status_code == 302 and created["Location"] == url  # a reload does not post again
    response = client.get(url)
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    secret = response.context["new_token"]["secret"]
    assert secret in response.content.decode()
    assert bearer(secret).get(ME).status_code == 200
    page = client.get(url).content.decode()
    assert "notebook" in page and secret not in page and f"gpp_{secret[4:14]}_" in page


def test_tokens_page_shows_form_errors(client):
    user = UserFactory()
    client.force_login(user)
    response = client.post(reverse("tenants:token-list"), {"name": "", "expires_in_days": "30"})
    assert response.status_code == 400
    assert not AccessToken.objects.exists()


def test_revoke_from_the_page_and_another_users_token_is_404(client):
    user, other = UserFactory(), UserFactory()
    token, raw = access_token_create(actor=user, name="notebook")
    url = reverse("tenants:token-revoke", args=[token.pk])
    assert request_as(client, other, url, method="post").status_code == 404
    assert request_as(client, None, url, method="post").status_code == 302
    asked = request_as(client, user, url, method="post")
    assert asked.status_code == 200 and bearer(raw).get(ME).status_code == 200, "unconfirmed: asks, revokes nothing"
    assert request_as(client, user, url, method="post", data={"confirmed": "1"}).status_code == 302
    assert bearer(raw).get(ME).status_code == 401
