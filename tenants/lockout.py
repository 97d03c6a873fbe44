"""Every lockout (a username or an address that failed to sign in, or sent bad tokens, too often) is an audit
event, written once per lockout window rather than once per refused attempt."""

from datetime import timedelta

from axes.helpers import get_cool_off
from django.conf import settings
from django.utils import timezone

from portal.lockout import TOKEN_CREDENTIAL

from .models import AuditEvent

ACTION = "auth.locked_out"


def record_lockout(sender, request=None, username=None, ip_address=None, **kwargs) -> AuditEvent | None:
    """Receiver of axes' user_locked_out signal, sent when the limit is reached and again for each attempt refused
    while locked."""
    if username == TOKEN_CREDENTIAL:  # bad tokens lock the address's tokens, not a user
        username = None
    object_type, object_id = ("user", username) if username else ("address", ip_address or "")
    window = get_cool_off(request) or timedelta(0)
    already = AuditEvent.objects.filter(action=ACTION, object_type=object_type, object_id=object_id[:64],
                                        source_ip=ip_address or None, at__gte=timezone.now() - window)
    if window and already.exists():
        return None
    path = getattr(request, "path", "") or ""
    return AuditEvent.objects.create(
        action=ACTION, object_type=object_type, object_id=object_id[:64],
        object_repr=f"{username or 'bearer token'} from {ip_address or 'unknown address'}"[:200],
        after={"failures": settings.AXES_FAILURE_LIMIT, "locked_minutes": int(window.total_seconds() // 60),
               "path": path[:200]},
        source_ip=ip_address or None,
    )
