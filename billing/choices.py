from django.db import models


class HourState(models.TextChoices):
    COLLECTED = "collected", "Collected"
    # Prometheus answered, but with gaps or NaN for part of the hour: kept out of the numbers until re-collected.
    PARTIAL = "partial", "Partial"
    FAILED = "failed", "Failed"


class StatementState(models.TextChoices):
    DRAFT = "draft", "Draft (month open)"
    FINAL = "final", "Final"
