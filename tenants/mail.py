"""E-mail notifications, sent by a task once the deciding transaction has committed."""

from portal.enqueue import enqueue_on_commit

from .tasks import send_email_task


def notify_users(*, users, subject: str, body: str) -> None:
    """Email after commit (a rolled-back decision sends nothing); the task retries a failing mail server."""
    recipients = sorted({u.email for u in users if u is not None and u.email})
    if not recipients:
        return

    enqueue_on_commit(send_email_task, subject, body, recipients)
