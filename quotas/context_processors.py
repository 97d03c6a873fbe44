"""What every page's navigation shows about quotas: the console's count of requests awaiting a decision."""

from django.utils.functional import SimpleLazyObject

from . import selectors


class _PendingCount:
    def __init__(self):
        self.count = selectors.pending_request_count()


def console_counts(request) -> dict:
    """Platform admins see how many requests wait on the Approvals link; read only when a page shows the link."""
    user = getattr(request, "user", None)
    if user is None or not (user.is_authenticated and user.is_staff):
        return {}
    return {"pending_approvals": SimpleLazyObject(_PendingCount)}
