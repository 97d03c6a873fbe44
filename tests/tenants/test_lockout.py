"""Password and token guessing: after the configured number of failures a username, and separately an address, is
locked out of the portal's login, the Django admin's login and the API for the configured window, even with the
right password; each lockout is one audit event; the window passing unlocks."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client

from tenants.models import AuditEvent
from tests.api.world import token_for
from tests.factories import PlatformAdminFactory, UserFactory

pytestmark = pytest.mark.django_db
PASSWORD = "pw-for-tests-only"
LOGINS = {"portal": "/login/", "admin": "/django-admin/login/"}


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=10)


def attempt(path: str, username: str, password: str, address: str = "203.0.113.7"):
    client = Client(REMOTE_ADDR=address)
    return client, client.post(path, {"username": username, "password": password})


def signed_in(client) -> bool:
    return bool(client.session.get("_auth_user_id"))


def lockouts(**filters):
    return AuditEvent.objects.filter(action="auth.locked_out", **filters)


def let_the_window_pass(settings):
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.first().attempt_time
                                 - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))


@pytest.mark.parametrize("where", LOGINS)
def test_a_username_is_locked_after_the_limit_even_with_the_right_password(where, settings):
    PlatformAdminFactory(username="alice")
    path = LOGINS[where]
    for n in range(2):
        client, response = attempt(path, "alice", f"guess-{n}")
        assert response.status_code == 200 and not signed_in(client)  # the form again, with its error
    client, response = attempt(path, "alice", "guess-2")
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.text and "even with the right password" in response.text
    # Locked: the right password from another address is refused too, and says why.
    client, response = attempt(path, "alice", PASSWORD, address="198.51.100.9")
    assert response.status_code == 429 and not signed_in(client)
    # One event per locked account and address it was tried from: more refused attempts are not more events.
    attempt(path, "alice", "guess-3")
    attempt(path, "alice", PASSWORD, address="198.51.100.9")
    events = lockouts().order_by("id")
    assert [(e.object_type, e.object_id, e.source_ip) for e in events] == [
        ("user", "alice", "203.0.113.7"), ("user", "alice", "198.51.100.9")]
    assert events[0].after == {"failures": 3, "locked_minutes": 10, "path": path}

    let_the_window_pass(settings)
    client, response = attempt(path, "alice", PASSWORD)
    assert response.status_code == 302 and signed_in(client)


def test_an_address_is_locked_after_the_limit_across_usernames(settings):
    UserFactory(username="bob")
    for name in ("x1", "x2", "x3"):
        attempt("/login/", name, "guess")
    client, response = attempt("/login/", "bob", PASSWORD)
    assert response.status_code == 429 and not signed_in(client)
    assert lockouts(object_id="x3", source_ip="203.0.113.7").exists()
    # bob himself is not locked: from another address he signs in.
    client, response = attempt("/login/", "bob", PASSWORD, address="198.51.100.9")
    assert response.status_code == 302 and signed_in(client)


def test_forwarded_for_headers_do_not_pick_the_address_that_is_locked():
    UserFactory(username="bob")
    for n in range(3):
        Client(REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}").post(
            "/login/", {"username": f"x{n}", "password": "guess"})
    client, response = attempt("/login/", "bob", PASSWORD)
    assert response.status_code == 429


def test_a_success_below_the_limit_resets_the_count():
    UserFactory(username="bob")
    for _ in range(2):
        attempt("/login/", "bob", "guess")
    assert signed_in(attempt("/login/", "bob", PASSWORD)[0])
    for _ in range(2):
        attempt("/login/", "bob", "guess")
    assert signed_in(attempt("/login/", "bob", PASSWORD)[0])
    assert not lockouts().exists()


def test_bad_bearer_tokens_lock_the_address_but_not_valid_tokens(settings):
    user = UserFactory(username="carol")
    valid = token_for(user)
    client = Client(REMOTE_ADDR="203.0.113.7")
    bad = {"HTTP_AUTHORIZATION": "Bearer gpp_0123456789_" + "A" * 43}
    for _ in range(2):
        response = client.get("/api/v1/me/", **bad)
        assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    response = client.get("/api/v1/me/", **bad)
    body = response.json()["error"]
    assert response.status_code == 429 and body["code"] == "locked" and "locked for 10 minutes" in body["message"]
    assert client.get("/api/v1/me/", HTTP_AUTHORIZATION="Bearer not-even-a-token").status_code == 429
    event = lockouts().get()
    assert (event.object_type, event.object_id, event.source_ip) == ("address", "203.0.113.7", "203.0.113.7")
    assert event.after["path"] == "/api/v1/me/"
    # A real token from the same address still works, and other addresses are not locked.
    assert client.get("/api/v1/me/", HTTP_AUTHORIZATION=f"Bearer {valid}").json()["username"] == "carol"
    assert Client(REMOTE_ADDR="198.51.100.9").get("/api/v1/me/", **bad).status_code == 401
    # Bad tokens lock only the address's tokens: password sign-in from it still works (behind an ingress every
    # user shares the address, and a script's revoked token must not lock them all out of the browser).
    user.set_password(PASSWORD)
    user.save()
    assert signed_in(attempt("/login/", "carol", PASSWORD)[0])

    let_the_window_pass(settings)
    assert client.get("/api/v1/me/", **bad).status_code == 401


def test_the_limit_and_window_come_from_the_environment():
    import subprocess
    import sys

    code = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE']='config.settings'; django.setup(); "
            "from django.conf import settings as s; print(s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"LOGIN_FAILURE_LIMIT": "7", "LOGIN_LOCKOUT_MINUTES": "30", "PATH": ""})
    assert out.stdout.split("\n")[-2] == "7 0:30:00"


def test_password_failures_and_token_failures_are_counted_apart():
    UserFactory(username="bob")
    bad = {"HTTP_AUTHORIZATION": "Bearer gpp_0123456789_" + "A" * 43}
    for n in range(2):
        attempt("/login/", f"x{n}", "guess")
        Client(REMOTE_ADDR="203.0.113.7").get("/api/v1/me/", **bad)
    # The third bad token locks the address's tokens; its two bad passwords are still below the limit of three.
    assert Client(REMOTE_ADDR="203.0.113.7").get("/api/v1/me/", **bad).status_code == 429
    assert signed_in(attempt("/login/", "bob", PASSWORD)[0])


@pytest.mark.parametrize(("remote", "forwarded", "client"), [
    ("10.1.2.3", "198.51.100.4", "198.51.100.4"),  # through the ingress: the client it saw
    ("10.1.2.3", "203.0.113.9, 198.51.100.4", "198.51.100.4"),  # the leftmost hop is the client's own to forge
    ("10.1.2.3", "198.51.100.4, 10.9.0.1", "198.51.100.4"),  # two trusted proxies in a row
    ("203.0.113.7", "198.51.100.4", "203.0.113.7"),  # not from a trusted proxy: the header is not believed
    ("10.1.2.3", "not-an-address", "10.1.2.3"),
    ("10.1.2.3", "", "10.1.2.3"),
])
def test_behind_trusted_proxies_the_locked_address_is_the_clients(settings, remote, forwarded, client):
    from django.test import RequestFactory

    from portal.lockout import client_ip

    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    request = RequestFactory().get("/login/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == client


def test_behind_an_ingress_one_user_locked_out_leaves_the_others_signing_in(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    UserFactory(username="bob")
    for n in range(3):
        Client(REMOTE_ADDR="10.1.2.3", HTTP_X_FORWARDED_FOR="198.51.100.4").post(
            "/login/", {"username": f"x{n}", "password": "guess"})
    elsewhere = Client(REMOTE_ADDR="10.1.2.3", HTTP_X_FORWARDED_FOR="198.51.100.5")
    elsewhere.post("/login/", {"username": "bob", "password": PASSWORD})
    assert signed_in(elsewhere)
