"""Telling a workspace's owner what happened to it: an e-mail, the team's webhook (signed JSON, delivered with
retries), and its page, which shows the stage and its audit events."""

from __future__ import annotations

from tenants import webhooks
from tenants.mail import notify_users

NEXT = {
    "warned": "Keep it running from its page, or it will be suspended: its pod goes, its GPUs go back to the team's "
              "quota, its home volume stays, and Resume brings it back.",
    "suspended": "Its home volume is kept; Resume on its page queues it again with the same volume.",
    "volume deleted": "Its home volume is deleted; the workspace can no longer be resumed.",
}


def tell(workspace, what: str, reason: str) -> None:
    """E-mail the owner and notify the team's webhook (both after commit)."""
    subject = f"Workspace {workspace.name} {what}"
    notify_users(users=[workspace.owner], subject=subject,
                 body=f"{workspace.team.slug}/{workspace.name}: {what}. {reason}\n\n{NEXT.get(what, '')}".strip())
    webhooks.notice(team=workspace.team, event=f"workspace.{what.replace(' ', '_')}", subject=subject, reason=reason,
                    next_step=NEXT.get(what, ""),
                    data={"workspace": {"id": workspace.pk, "name": workspace.name, "owner": workspace.owner.username,
                                        "cluster": workspace.cluster.name, "volume": workspace.volume_name,
                                        "activity": workspace.activity}})
