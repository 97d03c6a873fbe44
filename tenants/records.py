"""What the portal keeps of people's actions: the audit log and personal access tokens. Models of the tenants app
(tenants.models imports them, which registers them)."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    """Who did what to which object, before and after, when and from where."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=60)
    object_type = models.CharField(max_length=60)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200)
    team = models.ForeignKey("tenants.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.object_repr}"

    @property
    def object_label(self) -> str:
        """The object in words: its name when it has one ("quotarequest #18" rather than "#18 #18")."""
        repr_ = self.object_repr.strip()
        return "" if repr_ in ("", f"#{self.object_id}", self.object_id) else repr_

    @property
    def changes(self) -> list[tuple[str, str, str]]:
        """(field, before, after) of each field that changed, in words: no raw dictionaries on the page."""
        before, after = self.before or {}, self.after or {}
        if not isinstance(before, dict) or not isinstance(after, dict):
            return [("", _words(before), _words(after))]
        keys = list(dict.fromkeys([*before, *after]))
        return [(key.replace("_", " "), _words(before.get(key)), _words(after.get(key)))
                for key in keys if before.get(key) != after.get(key)]


def _words(value) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {_words(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_words(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


class AccessToken(models.Model):
    """A personal access token for scripts and notebooks, acting as its user.

    Only the SHA-256 digest of the secret is stored; the short prefix, which is not secret, finds the row so the
    digest comparison is one constant-time compare, never a search by secret.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'training notebook'.")
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Fine-grained scope (as GitHub's fine-grained tokens): reads only, and only these teams (ids of teams the
    # owner is a member of; empty: all of them). A token limited to teams never acts as a platform admin.
    read_only = models.BooleanField(default=False, help_text="The token may read but not change anything.")
    team_ids = models.JSONField(default=list, blank=True, help_text="The teams it may act in; empty for all.")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    def is_active(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class IdempotencyKey(models.Model):
    """The first answer to a create request sent with an `Idempotency-Key` header, kept so a client that retries
    (it timed out, the connection dropped) gets that answer again instead of creating a second object. Per user and
    key; `fingerprint` is the endpoint and body it was first sent with, so a key reused for another request is
    refused rather than answered with an unrelated object."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_per_user")]

    def __str__(self):
        return f"{self.user_id}:{self.key}"


class TeamWebhook(models.Model):
    """Where a team wants to hear, as JSON, that work is being lost (a job preempted or evicted, a workspace warned,
    suspended or its volume deleted), signed with the team's secret.

    The secret is kept as it is: the portal must sign with it on every delivery, which a hash could not do. It is
    shown to team admins once when set or rotated, and never in lists, the API or the admin."""

    team = models.OneToOneField("tenants.Team", on_delete=models.CASCADE, related_name="webhook")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=100, editable=False)
    active = models.BooleanField(default=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"{self.team.slug} → {self.url}"


class WebhookDelivery(models.Model):
    """One notice sent (or being retried) to a team's webhook: what, where, and how it went."""

    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="webhook_deliveries")
    event = models.CharField(max_length=60)
    payload = models.JSONField()
    url = models.CharField(max_length=500)
    attempts = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["team", "-created_at"], name="webhook_delivery_team_newest")]

    def __str__(self):
        return f"{self.team_id} {self.event} {self.created_at:%Y-%m-%d %H:%M}"
