"""Single sign-on: the group → membership rules, the backend's claim checks, and the whole authorization-code
flow against a small OpenID provider served over real HTTP from the test (RSA-signed ID tokens, JWKS, PKCE)."""

import base64
import hashlib
import importlib
import json
import logging
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.urls import clear_url_caches

from tenants import services
from tenants.choices import MembershipSource, Role, TeamState
from tenants.models import AuditEvent, Membership, TeamNamespace
from tests.factories import MembershipFactory, TeamFactory, TeamNamespaceFactory, UserFactory

pytestmark = pytest.mark.django_db

CLIENT_ID = "gpu-portal"
CLIENT_SECRET = "client-secret-" + "s3cr3t" * 4


# --- an OpenID provider over real HTTP ------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Provider:
    """Discovery, authorize, token, userinfo and JWKS; knobs let a test make it misbehave."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-key-1"
        self.claims = {}  # who signs in at the next authorize
        self.id_token_overrides = {}
        self.sign_with_other_key = False
        self.token_status = 200
        self.codes, self.access_tokens, self.issued = {}, {}, []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def endpoint(self, name: str) -> str:
        return f"{self.url}/{name}"

    def jwks(self) -> dict:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def authorize(self, query: dict) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"query": query, "claims": dict(self.claims)}
        return f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"

    def token(self, form: dict) -> tuple[int, dict]:
        grant = self.codes.pop(form.get("code", ""), None)
        if (form.get("client_id"), form.get("client_secret")) != (CLIENT_ID, CLIENT_SECRET):
            return 401, {"error": "invalid_client"}
        if grant is None or form.get("redirect_uri") != grant["query"]["redirect_uri"]:
            return 400, {"error": "invalid_grant"}
        challenge = _b64url(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
        if challenge != grant["query"].get("code_challenge"):
            return 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
        if self.token_status != 200:
            return self.token_status, {"error": "temporarily_unavailable"}
        now = int(time.time())
        id_claims = {"iss": self.url, "aud": CLIENT_ID, "sub": grant["claims"].get("sub", "subject-1"),
                     "iat": now, "exp": now + 300, "nonce": grant["query"]["nonce"], **self.id_token_overrides}
        key = self.other_key if self.sign_with_other_key else self.key
        id_token = jwt.encode(id_claims, key, algorithm="RS256", headers={"kid": self.kid})
        access_token = secrets.token_urlsafe(24)
        self.access_tokens[access_token] = grant["claims"]
        self.issued += [id_token, access_token]
        return 200, {"access_token": access_token, "id_token": id_token, "token_type": "Bearer", "expires_in": 300}

    def _handler(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                split = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                if split.path == "/.well-known/openid-configuration":
                    return self._send(200, {"issuer": provider.url, "jwks_uri": provider.endpoint("jwks"),
                                            **{f"{n}_endpoint": provider.endpoint(n)
                                               for n in ("authorization", "token", "userinfo")}})
                if split.path == "/jwks":
                    return self._send(200, provider.jwks())
                if split.path == "/authorization":
                    return self._send(302, {}, [("Location", provider.authorize(query))])
                if split.path == "/userinfo":
                    token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    if token not in provider.access_tokens:
                        return self._send(401, {"error": "invalid_token"})
                    return self._send(200, provider.access_tokens[token])
                return self._send(404, {"error": "not_found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if urlsplit(self.path).path != "/token":
                    return self._send(404, {"error": "not_found"})
                return self._send(*provider.token(form))

        return Handler


@pytest.fixture
def provider():
    p = Provider()
    p.thread.start()
    yield p
    p.server.shutdown()
    p.server.server_close()


def _reload_urls():
    import config.urls

    importlib.reload(config.urls)
    clear_url_caches()


@pytest.fixture
def sso(settings, provider):
    """The portal configured as docs/admin-guide.md says, against the test provider; URLs reloaded to add /oidc/."""
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_OP_ISSUER = provider.url
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = provider.endpoint("authorization")
    settings.OIDC_OP_TOKEN_ENDPOINT = provider.endpoint("token")
    settings.OIDC_OP_USER_ENDPOINT = provider.endpoint("userinfo")
    settings.OIDC_OP_JWKS_ENDPOINT = provider.endpoint("jwks")
    settings.OIDC_PLATFORM_ADMIN_GROUP = "gpu-platform"
    # As settings.py builds them: the lockout backend first, then passwords, then SSO.
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "tenants.auth.PortalOIDCBackend"]
    _reload_urls()
    yield provider
    settings.OIDC_ENABLED = False
    _reload_urls()


def sign_in(client, provider, claims: dict, next_url: str = "/"):
    """Browser steps: portal → provider (the user is `claims`) → portal callback. Answers the callback's response."""
    provider.claims = claims
    start = client.get("/oidc/authenticate/", {"next": next_url})
    assert start.status_code == 302 and start["Location"].startswith(provider.endpoint("authorization"))
    query = parse_qs(urlsplit(start["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["client_id"] == [CLIENT_ID]
    assert "openid" in query["scope"][0].split()
    at_provider = requests.get(start["Location"], allow_redirects=False, timeout=5)
    callback = urlsplit(at_provider.headers["Location"])
    assert callback.path == "/oidc/callback/"
    return client.get(callback.path, {k: v[-1] for k, v in parse_qs(callback.query).items()})


def login_messages(response) -> list[str]:
    return [str(m) for m in messages.get_messages(response.wsgi_request)]


def alice(**extra):
    return {"sub": "u-1", "preferred_username": "alice", "email": "alice@example.com", "given_name": "Alice",
            "family_name": "Liddell", "groups": ["ml-research", "vision-admins", "unrelated"], **extra}


# --- the login page ---------------------------------------------------------------------------------------------


def test_login_page_has_no_sso_button_when_sso_is_off(client):
    page = client.get("/login/")
    assert page.status_code == 200 and "Sign in with SSO" not in page.text


def test_login_page_offers_sso_and_keeps_the_next_page(client, sso):
    page = client.get("/login/", {"next": "/teams/ml/"})
    assert "Sign in with SSO" in page.text
    assert 'href="/oidc/authenticate/?next=/teams/ml/"' in page.text


def test_local_accounts_still_sign_in_with_sso_on(client, sso):
    UserFactory(username="local-bob")
    response = client.post("/login/", {"username": "local-bob", "password": "pw-for-tests-only"})
    assert response.status_code == 302 and client.session.get("_auth_user_id")


# --- the whole flow ---------------------------------------------------------------------------------------------


def test_first_sign_in_creates_the_user_with_memberships_from_groups(client, sso):
    research = TeamFactory(slug="research", idp_group="ml-research")
    vision = TeamFactory(slug="vision", idp_group="vision")
    TeamFactory(slug="other", idp_group="other")
    namespace = TeamNamespaceFactory(team=research)
    generation = namespace.generation

    response = sign_in(client, sso, alice(), next_url="/teams/vision/")

    assert response.status_code == 302 and response["Location"] == "/teams/vision/"
    user = response.wsgi_request.user
    assert user.is_authenticated and user.username == "alice"
    assert (user.email, user.first_name, user.last_name) == ("alice@example.com", "Alice", "Liddell")
    assert not user.has_usable_password() and not user.is_staff
    memberships = {(m.team.slug, m.role, m.source) for m in Membership.objects.filter(user=user)}
    assert memberships == {("research", Role.MEMBER, MembershipSource.IDP),
                           ("vision", Role.ADMIN, MembershipSource.IDP)}
    assert TeamNamespace.objects.get(pk=namespace.pk).generation == generation + 1  # RoleBindings follow
    actions = sorted(AuditEvent.objects.filter(actor=user).values_list("action", "team__slug"))
    assert actions == [("membership.idp_set", "research"), ("membership.idp_set", "vision")]
    assert client.get(f"/teams/{vision.slug}/").status_code == 200
    assert client.get("/teams/other/").status_code == 404


def test_next_sign_in_follows_group_changes_and_leaves_local_memberships(client, sso):
    research = TeamFactory(slug="research", idp_group="ml-research")
    vision = TeamFactory(slug="vision", idp_group="vision")
    infra = TeamFactory(slug="infra", idp_group="infra")
    sign_in(client, sso, alice(groups=["ml-research", "vision-admins", "gpu-platform"]))
    user = Membership.objects.get(team=research).user
    assert user.is_staff and user.is_superuser
    MembershipFactory(user=user, team=infra, role=Role.VIEWER)  # added by hand in the portal
    client.logout()

    response = sign_in(client, sso, alice(groups=["ml-research-admins", "infra-admins"]))

    assert response.status_code == 302 and response.wsgi_request.user == user
    assert {(m.team.slug, m.role, m.source) for m in Membership.objects.filter(user=user)} == {
        ("research", Role.ADMIN, MembershipSource.IDP), ("infra", Role.VIEWER, MembershipSource.LOCAL)}
    user.refresh_from_db()
    assert not user.is_staff and not user.is_superuser
    actions = set(AuditEvent.objects.filter(actor=user).values_list("action", "team__slug"))
    assert {("membership.idp_remove", vision.slug), ("user.platform_admin_revoke", None)} <= actions


def test_a_local_account_with_a_password_is_never_taken_over(client, sso):
    owner = UserFactory(username="alice", is_staff=True)
    response = sign_in(client, sso, alice())
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert not response.wsgi_request.user.is_authenticated
    assert any("local account with a password" in m for m in login_messages(response))
    owner.refresh_from_db()
    assert owner.has_usable_password() and owner.email == "alice@example.com" and owner.is_staff


@pytest.mark.parametrize("claims, expected", [
    ({"preferred_username": None}, "sent no 'preferred_username' claim"),
    ({"preferred_username": "alice smith"}, "is not a valid portal username"),
    ({"groups": "ml-research"}, "'groups' claim is not a list"),
    ({"groups": ["ok", 7]}, "'groups' claim is not a list"),
])
def test_claims_the_portal_cannot_accept_are_refused_with_the_reason(client, sso, claims, expected):
    response = sign_in(client, sso, {k: v for k, v in alice(**claims).items() if v is not None})
    assert not response.wsgi_request.user.is_authenticated
    assert [m for m in login_messages(response) if expected in m]
    assert not Membership.objects.exists()


@pytest.mark.parametrize("tamper", ["audience", "issuer", "signature", "expired"])
def test_an_id_token_that_fails_verification_signs_nobody_in(client, sso, tamper):
    if tamper == "signature":
        sso.sign_with_other_key = True
    else:
        sso.id_token_overrides = {"audience": {"aud": "another-client"}, "issuer": {"iss": "https://evil.example"},
                                  "expired": {"exp": int(time.time()) - 60}}[tamper]
    response = sign_in(client, sso, alice())
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert not response.wsgi_request.user.is_authenticated
    assert ["Single sign-on: the identity provider's answer could not be verified."] == login_messages(response)
    assert not Membership.objects.exists()


def test_a_failing_provider_is_shown_on_the_login_page(client, sso):
    sso.token_status = 503
    response = sign_in(client, sso, alice())
    assert response.status_code == 302 and not response.wsgi_request.user.is_authenticated
    assert any("could not complete the sign-in" in m for m in login_messages(response))


def test_sso_signs_in_beside_the_lockout_and_a_locked_address_is_refused(client, sso, settings):
    settings.AXES_FAILURE_LIMIT = 3
    UserFactory(username="local-bob")
    for _ in range(2):  # below the limit: single sign-on is unaffected
        client.post("/login/", {"username": "local-bob", "password": "wrong"})
    assert sign_in(client, sso, alice()).wsgi_request.user.is_authenticated
    client.logout()
    for name in ("x1", "x2", "x3"):  # the address is now locked
        client.post("/login/", {"username": name, "password": "wrong"})
    response = sign_in(client, sso, alice())
    assert response.status_code == 429 and "_auth_user_id" not in client.session


def test_a_replayed_callback_is_refused(client, sso):
    sso.claims = alice()
    start = client.get("/oidc/authenticate/")
    callback = urlsplit(requests.get(start["Location"], allow_redirects=False, timeout=5).headers["Location"])
    params = {k: v[-1] for k, v in parse_qs(callback.query).items()}
    assert client.get(callback.path, params).wsgi_request.user.is_authenticated
    client.logout()
    assert client.get(callback.path, params).status_code in (302, 400)
    assert "_auth_user_id" not in client.session


def test_no_secret_or_token_reaches_the_logs(client, sso, caplog):
    TeamFactory(slug="research", idp_group="ml-research")
    UserFactory(username="local-bob", password="Correct-Horse-Battery-9")
    with caplog.at_level(logging.DEBUG):
        sign_in(client, sso, alice())
        sso.token_status = 503
        client.logout()
        sign_in(client, sso, alice())
        client.post("/login/", {"username": "local-bob", "password": "Correct-Horse-Battery-9"})
        client.post("/login/", {"username": "local-bob", "password": "Wrong-Horse-Battery-0"})
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__.get('request', '')}" for r in caplog.records)
    assert caplog.records, "the flow logs nothing at DEBUG: the check would prove nothing"
    for secret in [CLIENT_SECRET, "Correct-Horse-Battery-9", "Wrong-Horse-Battery-0", *sso.issued]:
        assert secret not in logged


# --- the mapping service ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("groups, expected", [
    ([], {}),
    (["ml"], {"ml": Role.MEMBER}),
    (["ml-admins"], {"ml-admins": Role.MEMBER, "ml": Role.ADMIN}),
    (["ml-viewers", "ml"], {"ml-viewers": Role.MEMBER, "ml": Role.MEMBER}),
    (["ml-viewers"], {"ml-viewers": Role.MEMBER, "ml": Role.VIEWER}),
    (["ml-admins", "ml", "ml-viewers"], {"ml-admins": Role.MEMBER, "ml": Role.ADMIN, "ml-viewers": Role.MEMBER}),
    (["-admins"], {"-admins": Role.MEMBER}),
])
def test_idp_roles(groups, expected):
    assert services.idp_roles(groups=groups) == expected


def test_idp_roles_with_a_configured_admin_suffix(settings):
    settings.OIDC_ADMIN_GROUP_SUFFIX = ":owners"
    assert services.idp_roles(groups=["ml:owners"]) == {"ml:owners": Role.MEMBER, "ml": Role.ADMIN}


def test_sync_is_idempotent_and_skips_archived_teams():
    user = UserFactory(username="carol")
    team = TeamFactory(slug="research", idp_group="ml-research")
    TeamFactory(slug="old", idp_group="old-team", state=TeamState.ARCHIVED)
    namespace = TeamNamespaceFactory(team=team)
    first = services.membership_sync_from_idp(user=user, groups=["ml-research", "old-team"])
    assert first == {"added": ["research"], "updated": [], "removed": []}
    events, generation = AuditEvent.objects.count(), TeamNamespace.objects.get(pk=namespace.pk).generation
    second = services.membership_sync_from_idp(user=user, groups=["ml-research", "old-team"])
    assert second == {"added": [], "updated": [], "removed": []}
    assert AuditEvent.objects.count() == events
    assert TeamNamespace.objects.get(pk=namespace.pk).generation == generation


def test_sync_may_remove_a_teams_last_admin_because_the_provider_decides():
    user = UserFactory(username="dave")
    team = TeamFactory(slug="research", idp_group="ml-research")
    services.membership_sync_from_idp(user=user, groups=["ml-research-admins"])
    assert Membership.objects.get(team=team).role == Role.ADMIN
    assert services.membership_sync_from_idp(user=user, groups=[]) == {"added": [], "updated": [],
                                                                      "removed": ["research"]}
    assert not Membership.objects.filter(team=team).exists()


def test_sync_rejects_a_groups_value_that_is_not_a_list_of_names():
    with pytest.raises(ValidationError, match="list of strings"):
        services.membership_sync_from_idp(user=UserFactory(), groups="ml-research")


def test_platform_admin_follows_the_group_only_when_one_is_configured(settings):
    user = UserFactory(is_staff=True)
    settings.OIDC_PLATFORM_ADMIN_GROUP = ""
    assert services.platform_admin_sync_from_idp(user=user, groups=[]) is True
    settings.OIDC_PLATFORM_ADMIN_GROUP = "gpu-platform"
    assert services.platform_admin_sync_from_idp(user=user, groups=["x"]) is False
    user.refresh_from_db()
    assert not user.is_staff
    assert AuditEvent.objects.filter(action="user.platform_admin_revoke", object_id=str(user.pk)).exists()


# --- in a real browser ------------------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_person_signs_in_with_sso_in_chromium_and_lands_on_the_page_they_asked_for(browser, live_server, sso):
    TeamFactory(slug="research", name="Research", idp_group="ml-research")
    sso.claims = alice()
    page = browser.new_page()
    page.goto(f"{live_server.url}/teams/research/")
    assert "/login/" in page.url
    page.get_by_role("link", name="Sign in with SSO").click()
    page.wait_for_url(f"{live_server.url}/teams/research/")
    assert "Research" in page.inner_text("main")
    page.close()
