"""API authentication by personal access token (`Authorization: Bearer gpp_…`)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS, BasePermission

from portal import lockout

from . import selectors
from .models import AccessToken
from .tokens import access_token_touch


class BearerTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer gpp_…`: a personal access token acts as its user. The token never reaches a log."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Send 'Authorization: Bearer <token>' with one token.")
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raw = ""
        token = selectors.access_token_for_secret(raw) if raw else None
        if token is None:
            lockout.bad_token(request._request)  # counts against the address; 429 once it is locked
            raise exceptions.AuthenticationFailed("The token is not valid, has expired or was revoked.")
        access_token_touch(token=token)
        return token.user, token

    def authenticate_header(self, request):
        # Makes DRF answer a missing or bad credential with 401 (and this challenge) rather than 403.
        return f'{self.keyword} realm="api"'


class TokenScopePermission(BasePermission):
    """A read-only token reads: any other method is refused (403) before the view runs."""

    message = "This token is read-only: create a read-write token to change anything."

    def has_permission(self, request, view) -> bool:
        token = request.auth
        return not (isinstance(token, AccessToken) and token.read_only and request.method not in SAFE_METHODS)


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.authentication.BearerTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A personal access token (gpp_…)."}
