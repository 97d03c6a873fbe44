from django.db import models


class JobKind(models.TextChoices):
    PYTORCH = "pytorch", "PyTorch distributed"
    RAY = "ray", "Ray"
    BATCH = "batch", "Batch"


class JobState(models.TextChoices):
    PENDING = "pending", "Pending"  # not yet applied to the cluster
    QUEUED = "queued", "Queued"  # applied, waiting for quota
    ADMITTED = "admitted", "Admitted"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"


TERMINAL_STATES = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}


class Placement(models.TextChoices):
    """How firmly a job's workers are kept within one topology domain (Kueue podset-required/-preferred-topology;
    Volcano networkTopology mode hard/soft)."""

    REQUIRED = "required", "Required"
    PREFERRED = "preferred", "Preferred"


class WaitReason(models.TextChoices):
    """Why a job that is not running yet waits: its team's quota, room in the nodes (topology, gang), or its
    team's budget."""

    QUOTA = "quota", "Quota"
    PLACEMENT = "placement", "Placement"
    BUDGET = "budget", "Budget"
