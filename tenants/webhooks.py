"""A team's outgoing webhook: set (the URL checked against SSRF, a new secret shown once), and the notices sent to
it. Each notice is a `WebhookDelivery` row delivered by a Celery task that retries with backoff; the row says how it
went, so a failing receiver is shown on the team's webhook page, not swallowed."""

from __future__ import annotations

import json
import secrets
import time

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal import outbound
from portal.enqueue import enqueue_on_commit

from .audit import audit_record
from .choices import Role
from .models import Team, TeamWebhook, WebhookDelivery
from .selectors import team_role

SIGNATURE_HEADER = "X-GPU-Portal-Signature"
TIMESTAMP_HEADER = "X-GPU-Portal-Timestamp"
EVENT_HEADER = "X-GPU-Portal-Event"


def check_webhook_url(url: str, resolver: outbound.Resolver = outbound.system_resolver) -> outbound.Target:
    return outbound.check_url(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE_TARGETS, resolver=resolver)


@transaction.atomic
def team_webhook_set(*, actor, team: Team, url: str, rotate: bool = False,
                     source_ip: str | None = None) -> tuple[TeamWebhook, str | None]:
    """Set (or with an empty URL, remove) the team's webhook; the secret, when new, is returned once."""
    if team_role(user=actor, team=team) != Role.ADMIN:
        raise PermissionDenied("Only the team's admins can set its webhook.")
    found = TeamWebhook.objects.filter(team=team).first()
    if not url:
        if found:
            found.delete()
            audit_record(actor=actor, action="webhook.delete", obj=team, team=team, source_ip=source_ip)
        return None, None
    try:
        check_webhook_url(url)
    except outbound.UnsafeAddress as exc:
        raise ValidationError({"url": str(exc)}) from None
    secret = None
    if found is None or rotate:
        secret = secrets.token_urlsafe(32)
    hook = found or TeamWebhook(team=team)
    hook.url, hook.updated_at, hook.active = url, timezone.now(), True
    if secret:
        hook.secret = secret
    hook.full_clean(exclude=["secret"])
    hook.save()
    audit_record(actor=actor, action="webhook.set", obj=team, team=team, source_ip=source_ip,
                 after={"url": url, "new_secret": bool(secret)})
    return hook, secret


def notice(*, team: Team, event: str, subject: str, reason: str, next_step: str, data: dict) -> None:
    """Queue the notice for the team's webhook, if it has one (after commit, by a task that retries)."""
    hook = TeamWebhook.objects.filter(team=team, active=True).first()
    if hook is None:
        return
    payload = {"event": event, "team": team.slug, "subject": subject, "reason": reason, "next": next_step,
               "at": timezone.now().isoformat(timespec="seconds"), **data}
    delivery = WebhookDelivery.objects.create(team=team, event=event, payload=payload, url=hook.url)
    from .tasks import webhook_deliver_task

    enqueue_on_commit(webhook_deliver_task, delivery.pk)


class DeliveryFailed(Exception):
    """Worth another try: the receiver did not answer 2xx, or could not be reached."""


def webhook_deliver(*, delivery_id: int, resolver: outbound.Resolver = outbound.system_resolver) -> bool:
    """One attempt; True once delivered. An address that turned unsafe is recorded and never retried."""
    delivery = WebhookDelivery.objects.select_related("team__webhook").filter(pk=delivery_id).first()
    if delivery is None or delivery.delivered_at is not None:
        return True
    hook = getattr(delivery.team, "webhook", None)
    if hook is None:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(error="The team's webhook was removed.")
        return True
    body = json.dumps(delivery.payload, sort_keys=True).encode()
    stamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "User-Agent": "gpu-portal-webhook",
               EVENT_HEADER: delivery.event, TIMESTAMP_HEADER: stamp,
               SIGNATURE_HEADER: f"sha256={outbound.sign(hook.secret, stamp, body)}"}
    attempts = delivery.attempts + 1
    try:
        target = check_webhook_url(hook.url, resolver=resolver)
    except outbound.UnsafeAddress as exc:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=attempts, error=f"Not sent: {exc}")
        return True
    try:
        answer = outbound.post(target, body, headers, timeout=settings.WEBHOOK_TIMEOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001 - any transport failure is recorded and retried
        WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=attempts, error=f"{type(exc).__name__}: {exc}")
        raise DeliveryFailed(str(exc)) from exc
    if 200 <= answer.status < 300:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=attempts, status_code=answer.status,
                                                              error="", delivered_at=timezone.now())
        return True
    WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=attempts, status_code=answer.status,
                                                          error=answer.body[:500])
    raise DeliveryFailed(f"answered {answer.status}")
