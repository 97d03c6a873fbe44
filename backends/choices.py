"""The portal's words for a job, which every backend maps its scheduler's own onto (`jobs.choices` re-exports
them for the app)."""

from django.db import models


class JobKind(models.TextChoices):
    PYTORCH = "pytorch", "PyTorch distributed"
    RAY = "ray", "Ray"
    BATCH = "batch", "Batch"
    WORKSPACE = "workspace", "Workspace"  # one interactive pod with a home volume (the workspaces app)


class JobState(models.TextChoices):
    PENDING = "pending", "Pending"  # not yet applied to the cluster
    QUEUED = "queued", "Queued"  # applied, waiting for quota
    ADMITTED = "admitted", "Admitted"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"


class Placement(models.TextChoices):
    """How firmly a job's workers are kept within one topology domain (Kueue podset-required/-preferred-topology;
    Volcano networkTopology mode hard/soft)."""

    REQUIRED = "required", "Required"
    PREFERRED = "preferred", "Preferred"
