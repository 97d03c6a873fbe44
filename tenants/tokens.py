"""Personal access tokens: their shape, `gpp_<prefix>_<secret>`, and the writes that create, revoke and touch them.

The prefix (10 hex characters) is stored in clear to find the row and to show which token is which; the secret
(32 random bytes) is never stored, only the SHA-256 of the whole token. A hash this fast is right here because
the secret has 256 bits of entropy: there is nothing to guess, unlike a password.
"""

import hashlib
import re
import secrets
from datetime import timedelta

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from .audit import audit_record
from .models import AccessToken, Membership

TOKEN_RE = re.compile(r"^gpp_([0-9a-f]{10})_[A-Za-z0-9_-]{43}$")


def new_token() -> tuple[str, str]:
    """A fresh (prefix, token)."""
    prefix = secrets.token_hex(5)
    return prefix, f"gpp_{prefix}_{secrets.token_urlsafe(32)}"


def split_token(raw: str) -> str | None:
    """The prefix of a well-formed token, else None."""
    match = TOKEN_RE.match(raw or "")
    return match.group(1) if match else None


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


MAX_TOKEN_DAYS = 366


@transaction.atomic
def access_token_create(*, actor, name: str, expires_in_days: int | None = None, read_only: bool = False,
                        teams=(), source_ip: str | None = None) -> tuple[AccessToken, str]:
    """A new token for the actor; returns the row and the token itself, which is shown once and never stored.
    `teams` limits it to some of the actor's teams (none: all of them); `read_only` to reads."""
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_TOKEN_DAYS:
        raise ValidationError({"expires_in_days": f"Between 1 and {MAX_TOKEN_DAYS} days, or none for no expiry."})
    team_ids = sorted({team.pk for team in teams})
    if team_ids and Membership.objects.filter(user=actor, team_id__in=team_ids).count() != len(team_ids):
        raise ValidationError({"teams": "A token can be limited only to teams you are a member of."})
    prefix, raw = new_token()
    now = timezone.now()
    token = AccessToken(user=actor, name=name.strip(), prefix=prefix, digest=token_digest(raw), created_at=now,
                        expires_at=now + timedelta(days=expires_in_days) if expires_in_days else None,
                        read_only=read_only, team_ids=team_ids)
    token.full_clean()
    token.save()
    audit_record(actor=actor, action="token.create", obj=token,
                 after={"name": token.name, "prefix": prefix,
                        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
                        "read_only": read_only, "team_ids": team_ids},
                 source_ip=source_ip)
    return token, raw


@transaction.atomic
def access_token_revoke(*, actor, token: AccessToken, source_ip: str | None = None) -> AccessToken:
    token = AccessToken.objects.select_for_update().get(pk=token.pk)
    if token.user_id != actor.pk:
        raise PermissionDenied("Only the token's owner can revoke it.")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(actor=actor, action="token.revoke", obj=token, after={"prefix": token.prefix},
                     source_ip=source_ip)
    return token


TOKEN_TOUCH_SECONDS = 60


def access_token_touch(*, token: AccessToken) -> None:
    """Record use at most once a minute, so reading through the API does not write on every request."""
    now = timezone.now()
    if token.last_used_at and (now - token.last_used_at).total_seconds() < TOKEN_TOUCH_SECONDS:
        return
    AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
