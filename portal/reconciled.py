"""The row contract of the reconcile engine (portal/reconcile.py): the status every row whose objects are applied to a
cluster carries (an abstract model), and the state the UI derives from it."""

from django.db import models
from django.utils import timezone


class SyncState(models.TextChoices):
    """What the UI says about a reconciled row; derived from its conditions and generations."""

    APPLIED = "applied", "Applied"
    PENDING = "pending", "Pending"
    RETRYING = "retrying", "Retrying"
    REJECTED = "rejected", "Rejected"


class Reconciled(models.Model):
    """Status of a row whose objects are reconciled into a cluster.

    `generation` is bumped by every service that changes what the cluster should hold; reconcile records the
    generation it applied in `observed_generation`. Backoff state lives on the row so it survives restarts.
    """

    generation = models.PositiveBigIntegerField(default=1)
    observed_generation = models.PositiveBigIntegerField(default=0)
    conditions = models.JSONField(default=list, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    synced_at = models.DateTimeField(null=True, blank=True)
    objects_status = models.JSONField(default=list, blank=True)

    class Meta:
        abstract = True

    @property
    def ready_condition(self) -> dict:
        return next((c for c in self.conditions if c.get("type") == "Ready"), {})

    @property
    def sync_state(self) -> str:
        ready = self.ready_condition
        if ready.get("reason") == "Rejected" and self.observed_generation < self.generation:
            return SyncState.REJECTED
        if ready.get("reason") == "Retrying":
            return SyncState.RETRYING
        if self.observed_generation >= self.generation and ready.get("status") == "True":
            return SyncState.APPLIED
        return SyncState.PENDING

    @property
    def sync_message(self) -> str:
        return self.ready_condition.get("message", "")

    @property
    def retry_in_seconds(self) -> int | None:
        if self.next_attempt_at is None:
            return None
        return max(0, int((self.next_attempt_at - timezone.now()).total_seconds()))
