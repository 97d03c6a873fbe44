"""Guessing credentials is stopped by django-axes: after LOGIN_FAILURE_LIMIT failures a username, and separately an
address, is locked out for LOGIN_LOCKOUT_MINUTES, on the portal's login page, the Django admin's and for personal
access tokens. A locked account is refused even with the right password until the window has passed.

Password failures count against the username and the address. Bad bearer tokens are counted apart, against the
address under their own name (TOKEN_CREDENTIAL), and only lock further bad tokens from it: a token's 256-bit
secret cannot be guessed, so token failures are a script with a revoked token, not an attack on passwords, and
behind an ingress one such script must not lock the whole company out of the browser (LockoutHandler keeps the
two counts apart). A locked address's further bad tokens are answered 429 without being looked up; a valid token
still works from it.

The address is the connecting one, or behind TRUSTED_PROXIES the client's as the nearest trusted proxy saw it
(portal.http.client_address).
"""

from axes.handlers.database import AxesDatabaseHandler
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from django.contrib.auth.signals import user_login_failed
from django.shortcuts import render
from rest_framework import exceptions, status

from portal.http import client_address

# What the failure log names instead of a username: with a space, so no user can be called this.
TOKEN_CREDENTIAL = "bearer token"


def lockout_parameters(request, credentials) -> list[str]:
    """AXES_LOCKOUT_PARAMETERS: a login names a username, so it counts against the user and the address; bad
    tokens against the address's token count only; a credential with no username (a failed SSO callback) against
    the address only, or every such failure anywhere would pile up under one empty username and lock everyone
    out."""
    username = (credentials or {}).get("username")
    if username == TOKEN_CREDENTIAL:
        return [("ip_address", "username")]
    if username:
        return ["username", "ip_address"]
    return ["ip_address"]


def is_token_failure(credentials) -> bool:
    return (credentials or {}).get("username") == TOKEN_CREDENTIAL


class LockoutHandler(AxesDatabaseHandler):
    """AXES_HANDLER: axes' database handler, with an address's bad-token failures left out of what locks, resets
    and counts for sign-ins (they are recorded under TOKEN_CREDENTIAL, a name no user can have)."""

    def filter_user_attempts(self, request, credentials=None):
        attempts = super().filter_user_attempts(request, credentials)
        if is_token_failure(credentials):
            return attempts
        return [queryset.exclude(username=TOKEN_CREDENTIAL) for queryset in attempts]


def client_ip(request) -> str:
    """AXES_CLIENT_IP_CALLABLE: the client's address, as every audit event records it (X-Forwarded-For is believed
    only from TRUSTED_PROXIES, so a client cannot pick the address that is locked)."""
    return client_address(request) or ""


def lockout_minutes(request=None) -> int:
    cool_off = get_cool_off(request)
    return int(cool_off.total_seconds() // 60) if cool_off else 0


def lockout_response(request, original_response=None, credentials=None):
    """AXES_LOCKOUT_CALLABLE: the lockout page (429) for a sign-in; under /api/ the API's own 429 in the one error
    shape, which bad_token already raised."""
    if request.path.startswith("/api/") and original_response is not None:
        return original_response
    return render(request, "registration/locked_out.html", {
        "failure_limit": get_failure_limit(request, credentials),
        "username": get_client_username(request, credentials) or "",
        "minutes": lockout_minutes(request),
    }, status=status.HTTP_429_TOO_MANY_REQUESTS)


class Locked(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "locked"


def locked_message(request=None) -> str:
    return (f"Too many failed sign-ins or tokens from your address: it is locked for {lockout_minutes(request)} "
            "minutes after the last failure. Check the token your script sends.")


def bad_token(request) -> None:
    """A bearer token that is unknown, revoked or expired: count the failure against the address (locking it at
    the limit, which writes an audit event) and answer 429 once the address is locked."""
    credentials = {"username": TOKEN_CREDENTIAL}
    if not AxesProxyHandler.is_allowed(request, credentials):
        raise Locked(locked_message(request))
    user_login_failed.send(sender=__name__, credentials=credentials, request=request)
    if getattr(request, "axes_locked_out", False):
        raise Locked(locked_message(request))
