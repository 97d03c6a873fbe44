"""Guessing credentials is stopped by django-axes: after LOGIN_FAILURE_LIMIT failures a username, and separately an
address, is locked out for LOGIN_LOCKOUT_MINUTES, on the portal's login page, the Django admin's and for personal
access tokens. A locked account is refused even with the right password until the window has passed.

Password failures count against the username and the address; a bad bearer token names no user, so it counts
against the address only (see lockout_parameters). A locked address's further bad tokens are answered 429 without
being looked up. A valid token still works from a locked address: its 256-bit secret cannot be guessed, and one
script with a revoked token must not lock out every notebook behind the same NAT.
"""

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from django.contrib.auth.signals import user_login_failed
from django.shortcuts import render
from rest_framework import exceptions, status

TOKEN_CREDENTIAL = "bearer token"  # what the failure log names instead of a username


def lockout_parameters(request, credentials) -> list[str]:
    """AXES_LOCKOUT_PARAMETERS: a login names a username, so it counts against the user and the address; a
    credential with no username (a bearer token, a failed SSO callback) against the address only, or every such
    failure anywhere would pile up under one empty username and lock everyone out."""
    if credentials and credentials.get("username"):
        return ["username", "ip_address"]
    return ["ip_address"]


def client_ip(request) -> str:
    """AXES_CLIENT_IP_CALLABLE: the connecting address, as every audit event records it. Headers such as
    X-Forwarded-For are the client's to forge, so they never pick the address that is locked."""
    return request.META.get("REMOTE_ADDR") or ""


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
    credentials = {"token": TOKEN_CREDENTIAL}
    if not AxesProxyHandler.is_allowed(request, credentials):
        raise Locked(locked_message(request))
    user_login_failed.send(sender=__name__, credentials=credentials, request=request)
    if getattr(request, "axes_locked_out", False):
        raise Locked(locked_message(request))
