"""Small helpers every page uses: the platform-admin gate, the client address, service errors onto forms, a
service write from a valid form, and the confirmation of a destructive write."""

import ipaddress
from functools import lru_cache, wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string


def is_platform_admin(user) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def platform_admin_required(view):
    """Anonymous users go to the login page; signed-in users who are not platform admins get a 403."""

    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not is_platform_admin(request.user):
            raise PermissionDenied("Platform admins only.")
        return view(request, *args, **kwargs)

    return wrapped


def source_ip(request) -> str | None:
    return client_address(request)


@lru_cache(maxsize=8)
def _networks(cidrs: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in cidrs)


def _trusted(address: str, networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(request) -> str | None:
    """The client's address: the connecting one, unless that is one of TRUSTED_PROXIES; then X-Forwarded-For is
    read from the right (each proxy appends the address it saw), skipping trusted proxies, and the first other
    address is the client. Anything to the left of it was written by the client and is never believed."""
    remote = request.META.get("REMOTE_ADDR") or None
    networks = _networks(tuple(settings.TRUSTED_PROXIES))
    if not remote or not networks or not _trusted(remote, networks):
        return remote
    forwarded = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(forwarded):
        if not _trusted(hop, networks):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return remote  # garbage where an address should be: the proxy's own address, not a guess
    return remote


def add_service_errors(form, error: ValidationError) -> None:
    """Put a service's ValidationError on the form: field errors on their fields, the rest above the form."""
    if hasattr(error, "error_dict"):
        for field, errors in error.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, error.messages)


def write_from_form(request, form, write, *, message, to, **to_kwargs):
    """Run a service write for a form whose input is valid. On success: `message(result)` as a success message and
    a redirect to `to` (a URL name with `to_kwargs`, or a path); a write that answers with a page of its own (a
    confirmation, `confirmed_write`) returns it. On the service's ValidationError: its errors on the form and None,
    so the caller shows the form again."""
    try:
        result = write()
    except ValidationError as exc:
        add_service_errors(form, exc)
        return None
    if isinstance(result, HttpResponse):
        return result
    messages.success(request, message(result))
    return redirect(to, **to_kwargs)


def confirmed_write(request, write, *, question: str, consequence: str, context: dict, yes: str, back: str):
    """A destructive write from a page: its result once confirmed, else a confirmation page (an HttpResponse).

    The page's dialog (static/js/confirm.js) and the confirmation page both post `confirmed=1`. A post without it (a
    browser without JavaScript) runs the write in a transaction that is rolled back, so a refusal (permission, a
    conflict) comes out exactly as it would; when the write would succeed, the confirmation page states the
    `consequence` template with `context` (templates/confirm/, the text the dialog shows) and posts the same fields
    again with a "Yes, …" button.
    """
    if request.POST.get("confirmed") == "1":
        return write()
    with transaction.atomic():
        write()
        transaction.set_rollback(True)
    fields = [(name, value) for name, values in request.POST.lists() for value in values
              if name not in ("csrfmiddlewaretoken", "confirmed")]
    return render(request, "confirm.html", {"question": question, "yes": yes,
                                            "consequence": render_to_string(consequence, context).strip(),
                                            "back": back, "fields": fields, "action": request.path})
