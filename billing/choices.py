from django.db import models


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
