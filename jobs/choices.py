from django.db import models

from backends.choices import JobKind, JobState, Placement

__all__ = ["SUBMITTED_KINDS", "JobKind", "JobState", "Placement", "TERMINAL_STATES", "WaitReason"]


TERMINAL_STATES = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
# The kinds the submit form and the jobs API start; a workspace's runs are started by the workspaces app.
SUBMITTED_KINDS = (JobKind.PYTORCH, JobKind.RAY, JobKind.BATCH)


class WaitReason(models.TextChoices):
    """Why a job that is not running yet waits: its team's quota, room in the nodes (topology, gang), or its
    team's budget."""

    QUOTA = "quota", "Quota"
    PLACEMENT = "placement", "Placement"
    BUDGET = "budget", "Budget"
