"""A team's webhook: the address is checked against SSRF (loopback, link-local, private, shared, IPv6 and
IPv4-mapped forms) unless the platform allows private targets; a name that answers differently when the notice is
sent (DNS rebinding) is not called, and the connection goes to the checked IP itself. Deliveries are signed with
the team's secret and a failing receiver is recorded and retried."""

import json
from itertools import chain, repeat

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from portal import outbound
from tenants import webhooks
from tenants.choices import Role
from tenants.models import TeamWebhook, WebhookDelivery
from tests.factories import MembershipFactory, TeamFactory
from tests.webhook_receiver import Receiver


def resolving(*answers):
    """A resolver whose answers for any name come from `answers` in turn (the last repeats)."""
    found = chain(answers, repeat(answers[-1]))
    return lambda host, port: list(next(found))


@pytest.mark.parametrize(("url", "words"), [
    ("http://127.0.0.1/hook", "loopback"),
    ("http://localhost.example/hook", "loopback"),  # by name, below
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://10.1.2.3/hook", "private"),
    ("http://172.16.0.9/hook", "private"),
    ("http://192.168.1.20/hook", "private"),
    ("http://100.64.0.1/hook", "not public"),
    ("http://0.0.0.0/hook", "unspecified"),
    ("http://[::1]/hook", "loopback"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://[fd12:3456::1]/hook", "private"),
    ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    ("http://[::ffff:10.0.0.1]/hook", "private"),
])
def test_internal_targets_are_refused(url, words):
    names = {"localhost.example": ["127.0.0.1"]}
    with pytest.raises(outbound.UnsafeAddress, match=words):
        outbound.check_url(url, resolver=lambda host, port: names[host])


def test_a_name_is_refused_if_any_of_its_addresses_is_internal():
    with pytest.raises(outbound.UnsafeAddress, match="private"):
        outbound.check_url("https://hooks.example.com/x", resolver=resolving(["93.184.215.14", "10.0.0.5"]))


@pytest.mark.parametrize(("url", "words"), [("ftp://hooks.example.com/", "http"),
                                            ("https://user:pw@hooks.example.com/", "credentials"),
                                            ("https:///nohost", "no host"),
                                            ("http://hooks.example.com:99999/", "port")])
def test_malformed_addresses_are_refused(url, words):
    with pytest.raises(outbound.UnsafeAddress, match=words):
        outbound.check_url(url, resolver=resolving(["93.184.215.14"]))


def test_public_addresses_pass_and_private_ones_only_where_allowed():
    target = outbound.check_url("https://hooks.example.com/a?b=1", resolver=resolving(["2606:2800:21f:cb07::1"]))
    assert (target.host, target.port, target.path, target.ip) == ("hooks.example.com", 443, "/a?b=1",
                                                                 "2606:2800:21f:cb07::1")
    allowed = outbound.check_url("http://10.0.0.5:8080/h", allow_private=True, resolver=resolving(["10.0.0.5"]))
    assert (allowed.ip, allowed.port) == ("10.0.0.5", 8080)


@pytest.fixture
def team_admin(db):
    team = TeamFactory(slug="nlp")
    return team, MembershipFactory(team=team, role=Role.ADMIN).user


def test_setting_a_webhook_checks_the_address_and_shows_the_secret_once(team_admin, settings):
    team, admin = team_admin
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    with pytest.raises(ValidationError, match="loopback"):
        webhooks.team_webhook_set(actor=admin, team=team, url="http://127.0.0.1:9/hook")
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    with pytest.raises(PermissionDenied):
        webhooks.team_webhook_set(actor=member, team=team, url="http://127.0.0.1:9/hook")
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    hook, secret = webhooks.team_webhook_set(actor=admin, team=team, url="http://127.0.0.1:9/hook")
    assert secret and hook.secret == secret
    same, again = webhooks.team_webhook_set(actor=admin, team=team, url="http://127.0.0.1:9/other")
    assert again is None and same.secret == secret  # kept unless rotated
    _, rotated = webhooks.team_webhook_set(actor=admin, team=team, url="http://127.0.0.1:9/other", rotate=True)
    assert rotated and rotated != secret


def test_a_notice_is_signed_and_delivered(team_admin, settings, django_capture_on_commit_callbacks):
    team, admin = team_admin
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    with Receiver() as receiver:
        _, secret = webhooks.team_webhook_set(actor=admin, team=team, url=receiver.url)
        with django_capture_on_commit_callbacks(execute=True):
            webhooks.notice(team=team, event="job.preempted", subject="Job x preempted", reason="a higher tier",
                            next_step="requeued", data={"job": {"id": 7}})
        (call,) = receiver.calls
    assert call["path"] == "/hooks/gpu" and call["json"]["event"] == "job.preempted"
    assert call["json"]["job"] == {"id": 7} and call["json"]["next"] == "requeued"
    stamp = call["headers"][webhooks.TIMESTAMP_HEADER]
    assert call["headers"][webhooks.SIGNATURE_HEADER] == f"sha256={outbound.sign(secret, stamp, call['body'])}"
    assert WebhookDelivery.objects.get().delivered_at is not None


def test_a_failing_receiver_is_recorded_and_retried(team_admin, settings):
    team, admin = team_admin
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    with Receiver(answers=[503]) as receiver:
        webhooks.team_webhook_set(actor=admin, team=team, url=receiver.url)
        webhooks.notice(team=team, event="workspace.suspended", subject="s", reason="r", next_step="n", data={})
        delivery = WebhookDelivery.objects.get()
        with pytest.raises(webhooks.DeliveryFailed, match="503"):
            webhooks.webhook_deliver(delivery_id=delivery.pk)
        delivery.refresh_from_db()
        assert (delivery.status_code, delivery.attempts, delivery.delivered_at) == (503, 1, None)
        assert webhooks.webhook_deliver(delivery_id=delivery.pk) is True  # the retry
        delivery.refresh_from_db()
        assert (delivery.status_code, delivery.attempts) == (200, 2) and delivery.delivered_at
        assert len(receiver.calls) == 2


def test_dns_rebinding_is_defeated(team_admin, settings):
    """The name was public when the webhook was set; when the notice is sent it answers loopback: not called."""
    team, admin = team_admin
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    with Receiver() as receiver:
        rebinding = resolving(["93.184.215.14"], ["127.0.0.1"])
        url = f"http://rebind.example:{receiver.port}/hooks/gpu"
        webhooks.check_webhook_url(url, resolver=rebinding)  # what setting it saw: a public address
        TeamWebhook.objects.create(team=team, url=url, secret="s3cret")
        webhooks.notice(team=team, event="job.preempted", subject="s", reason="r", next_step="n", data={})
        delivery = WebhookDelivery.objects.get()
        assert webhooks.webhook_deliver(delivery_id=delivery.pk, resolver=rebinding) is True  # final: not retried
        delivery.refresh_from_db()
        assert delivery.delivered_at is None and "127.0.0.1, a loopback address" in delivery.error
        assert receiver.calls == []


def test_the_connection_goes_to_the_checked_ip(team_admin, settings):
    """A name only the portal's resolver knows still reaches the server: the request is sent to the address that
    was checked (with the name as Host), never resolved a second time by the HTTP library."""
    team, admin = team_admin
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    with Receiver() as receiver:
        TeamWebhook.objects.create(team=team, url=f"http://only-here.invalid:{receiver.port}/h", secret="k")
        webhooks.notice(team=team, event="e", subject="s", reason="r", next_step="n", data={})
        delivery = WebhookDelivery.objects.get()
        assert webhooks.webhook_deliver(delivery_id=delivery.pk, resolver=resolving(["127.0.0.1"])) is True
        (call,) = receiver.calls
    assert call["headers"]["Host"] == f"only-here.invalid:{receiver.port}"
    assert json.loads(call["body"])["event"] == "e"
