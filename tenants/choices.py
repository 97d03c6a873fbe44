from django.db import models


class Connection(models.TextChoices):
    SANDBOX = "sandbox", "Sandbox cluster"
    KUBECONFIG = "kubeconfig", "Kubeconfig context"
    IN_CLUSTER = "in_cluster", "In-cluster service account"


class Scheduler(models.TextChoices):
    KUEUE = "kueue", "Kueue"
    VOLCANO = "volcano", "Volcano"


class Sharing(models.TextChoices):
    """How a flavor's GPUs are handed out: by NVIDIA's device plugin (whole, MIG, time-slicing, MPS) or by
    Dynamic Resource Allocation through a DeviceClass."""

    EXCLUSIVE = "exclusive", "Exclusive (whole GPU)"
    MIG = "mig", "MIG slice"
    TIME_SLICED = "time_sliced", "Time-sliced"
    MPS = "mps", "MPS"
    DRA = "dra", "Dynamic Resource Allocation"


class TeamState(models.TextChoices):
    ACTIVE = "active", "Active"
    SUSPENDED = "suspended", "Suspended"
    ARCHIVED = "archived", "Archived"


class Role(models.TextChoices):
    ADMIN = "admin", "Team admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class PreemptionPolicy(models.TextChoices):
    PREEMPT_LOWER = "PreemptLowerPriority", "Preempts lower priority"
    NEVER = "Never", "Never preempts"


class MembershipSource(models.TextChoices):
    """Who manages a membership: people in the portal, or the identity provider's groups at each sign-in."""

    LOCAL = "local", "Portal"
    IDP = "idp", "Identity provider"


class MigStrategy(models.TextChoices):
    """How the NVIDIA device plugin advertises MIG slices (k8s-device-plugin internal/lm/mig-strategy.go)."""

    # Each profile is its own resource, nvidia.com/mig-<profile>.
    MIXED = "mixed", "mixed (nvidia.com/mig-<profile>)"
    # Every slice is an nvidia.com/gpu on a node whose GPUs all carry one profile; gpu.product names it.
    SINGLE = "single", "single (nvidia.com/gpu on MIG-labelled nodes)"


class BudgetHoldAction(models.TextChoices):
    """What a team's budget hold does to its running jobs of a tier (new jobs are always held)."""

    CONTINUE = "", "Keep running"
    SUSPEND = "suspend", "Suspend with notice, resubmitted to start when the hold lifts"


class IdleAction(models.TextChoices):
    """What the idle rule may do to a tier's running batch jobs whose GPUs do no work (workspaces always follow it)."""

    NONE = "", "Nothing"
    WARN = "warn", "Warn the submitter"
    SUSPEND = "suspend", "Warn, then stop the job"
