"""Small helpers every page uses: the platform-admin gate, the client address, service errors onto forms."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError


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
    return request.META.get("REMOTE_ADDR") or None


def add_service_errors(form, error: ValidationError) -> None:
    """Put a service's ValidationError on the form: field errors on their fields, the rest above the form."""
    if hasattr(error, "error_dict"):
        for field, errors in error.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, error.messages)
