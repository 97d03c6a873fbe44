"""Telling a workspace's owner what happened to it: an e-mail now (the page shows the stage and its audit
events)."""

from __future__ import annotations

from tenants.mail import notify_users

NEXT = {
    "warned": "Keep it running from its page, or it will be suspended: its pod goes, its GPUs go back to the team's "
              "quota, its home volume stays, and Resume brings it back.",
    "suspended": "Its home volume is kept; Resume on its page queues it again with the same volume.",
    "volume deleted": "Its home volume is deleted; the workspace can no longer be resumed.",
}


def tell(workspace, what: str, reason: str) -> None:
    """E-mail the owner (after commit)."""
    notify_users(users=[workspace.owner], subject=f"Workspace {workspace.name} {what}",
                 body=f"{workspace.team.slug}/{workspace.name}: {what}. {reason}\n\n{NEXT.get(what, '')}".strip())
