from django.db import models


class ScrapeShape(models.TextChoices):
    """How Prometheus stored dcgm-exporter's pod labels: the ServiceMonitor's honorLabels."""

    EITHER = "", "Detect from the series"
    DIRECT = "direct", "honorLabels: true (namespace, pod)"
    EXPORTED = "exported", "honorLabels: false (exported_namespace, exported_pod)"


class HourState(models.TextChoices):
    COLLECTED = "collected", "Collected"
    # Prometheus answered with gaps or NaN for part of the hour: what was observed is billed, and the hour is
    # collected again while it is within the backfill window (its rows are then replaced, never added to).
    PARTIAL = "partial", "Partial"
    FAILED = "failed", "Failed"


class StatementState(models.TextChoices):
    DRAFT = "draft", "Draft (month open)"
    # The month is over but some of its hours are missing or partial and will still be collected again.
    PENDING = "pending", "Awaiting collection"
    FINAL = "final", "Final"


class UtilisationSignal(models.TextChoices):
    """The dcgm-exporter field a usage row's "used" GPU-hours were read from, best first (billing/activity.py).

    SM activity is the share of SMs with work, so a loop of tiny kernels reads near zero; the other two are the share
    of time any kernel ran, so the same loop reads busy."""

    SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE", "SM activity"
    GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "graphics engine activity (time-based)"
    GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL", "GPU utilisation (time-based)"


class BudgetMode(models.TextChoices):
    """What a team's monthly budget does once it is spent: tell the team admins, or also hold new work."""

    NOTIFY = "notify", "Notify (alerts only)"
    HOLD = "hold", "Hold new work when spent"


class HoldKind(models.TextChoices):
    BUDGET = "budget", "Monthly budget"
    ALLOWANCE = "allowance", "GPU-hour allowance"
