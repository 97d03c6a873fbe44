"""Single sign-on: the OpenID Connect backend (mozilla-django-oidc) with the portal's account rules.

A user is the identity provider's username claim (the one the cluster's API server maps to Kubernetes users, so
the team RoleBindings name the same person). Each sign-in refreshes the name and e-mail, the platform-admin flag
and the team memberships single sign-on manages, from the groups claim. An SSO login never takes over a local
account that has a password: that would let whoever holds the name at the provider become that account.
"""

from __future__ import annotations

import logging

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from portal.http import source_ip

from . import services

log = logging.getLogger(__name__)


class SignInRefused(SuspiciousOperation):
    """Claims the portal cannot accept; the message is safe to show on the login page."""


class PortalOIDCBackend(OIDCAuthenticationBackend):
    def authenticate(self, request, **kwargs):
        if "nonce" not in kwargs:  # not the SSO callback (a password login): nothing to do here
            return None
        self._told = False
        try:
            user = super().authenticate(request, **kwargs)
        except requests.RequestException as exc:
            # Only the status is logged: the provider's answer can echo what was sent to it.
            status = getattr(exc.response, "status_code", None)
            log.warning("single sign-on failed: the identity provider answered %s", status or type(exc).__name__)
            self._tell(request, "the identity provider could not complete the sign-in. Try again in a moment.")
            return None
        except (SuspiciousOperation, jwt.PyJWTError) as exc:  # the library lets expiry errors through
            log.warning("single sign-on refused: %s", exc)
            self._tell(request, "the identity provider's answer could not be verified.")
            return None
        if user is None:
            self._tell(request, "the account could not be signed in.")
        return user

    def _tell(self, request, text: str) -> None:
        """One message per attempt, on the login page the callback redirects to."""
        if request is not None and not self._told:
            messages.error(request, f"Single sign-on: {text}")
            self._told = True

    # --- the ID token ---------------------------------------------------------------------------------------

    def verify_token(self, token, **kwargs):
        """The library checks signature, expiry and nonce; the issuer and the audience are checked here."""
        payload = super().verify_token(token, **kwargs)
        if payload.get("iss") != settings.OIDC_OP_ISSUER:
            raise SuspiciousOperation("The ID token was issued by another provider.")
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("The ID token is meant for another client.")
        return payload

    # --- claims → user --------------------------------------------------------------------------------------

    def verify_claims(self, claims) -> bool:
        try:
            self._username(claims)
            self._groups(claims)
        except SignInRefused as exc:
            log.warning("single sign-on refused: %s", exc)
            self._tell(self.request, str(exc))
            return False
        return True

    def _username(self, claims) -> str:
        name = claims.get(settings.OIDC_USERNAME_CLAIM)
        if not isinstance(name, str) or not name:
            raise SignInRefused(f"the identity provider sent no '{settings.OIDC_USERNAME_CLAIM}' claim.")
        try:
            UnicodeUsernameValidator()(name)
        except ValidationError:
            raise SignInRefused(f"'{name[:60]}' is not a valid portal username "
                                "(letters, digits and @.+-_ only).") from None
        if len(name) > 150:
            raise SignInRefused("the username is longer than 150 characters.")
        return name

    def _groups(self, claims) -> list[str]:
        groups = claims.get(settings.OIDC_GROUPS_CLAIM, [])
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise SignInRefused(f"the '{settings.OIDC_GROUPS_CLAIM}' claim is not a list of group names.")
        return groups

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(username=self._username(claims))

    @transaction.atomic
    def create_user(self, claims):
        user = self.UserModel(username=self._username(claims))
        user.set_unusable_password()  # the account signs in through the provider only
        user.save()
        return self.update_user(user, claims)

    @transaction.atomic
    def update_user(self, user, claims):
        if user.has_usable_password():
            message = (f"'{user.username}' is a local account with a password; it cannot be signed in through "
                       "the identity provider. A platform admin can remove its password to hand it over.")
            self._tell(self.request, message)
            raise SuspiciousOperation(message)
        fields = {"email": claims.get("email") or "", "first_name": claims.get("given_name") or "",
                  "last_name": claims.get("family_name") or ""}
        fields = {name: str(value)[:150] for name, value in fields.items()}
        changed = [name for name, value in fields.items() if getattr(user, name) != value]
        for name in changed:
            setattr(user, name, fields[name])
        if changed:
            user.save(update_fields=changed)
        groups = self._groups(claims)
        ip = source_ip(self.request) if self.request is not None else None
        services.platform_admin_sync_from_idp(user=user, groups=groups, source_ip=ip)
        services.membership_sync_from_idp(user=user, groups=groups, source_ip=ip)
        return user
