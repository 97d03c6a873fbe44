from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinLengthValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from tenants.models import GpuFlavor, Team

from .choices import RequestState, ReservationState

# Upper bounds that catch typos ("3200" for "32") long before a capacity check would.
MAX_UNITS = 100_000
MAX_CPU_CORES = 1_000_000
MAX_MEMORY_GIB = 10_000_000
MAX_STORAGE_GIB = 100_000_000


class Amounts(models.Model):
    """GPU units of one flavor plus the CPU, memory and storage that come with them."""

    guaranteed = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(MAX_UNITS)])
    burst = models.PositiveIntegerField(
        default=0, validators=[MaxValueValidator(MAX_UNITS)], help_text="Units the team may borrow beyond guaranteed."
    )
    cpu_cores = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(MAX_CPU_CORES)])
    memory_gib = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(MAX_MEMORY_GIB)])
    storage_gib = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(MAX_STORAGE_GIB)])

    class Meta:
        abstract = True

    @property
    def limit(self) -> int:
        return self.guaranteed + self.burst


class Quota(Amounts):
    """What a team holds of one flavor now. A time-boxed grant reverts to `revert_*` at `expires_at`."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quotas")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="quotas")
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    revert_guaranteed = models.PositiveIntegerField(default=0)
    revert_burst = models.PositiveIntegerField(default=0)
    # The rest of the grant a time box replaced; null on boxes granted before these were kept (left as they are).
    revert_cpu_cores = models.PositiveIntegerField(null=True, blank=True)
    revert_memory_gib = models.PositiveIntegerField(null=True, blank=True)
    revert_storage_gib = models.PositiveIntegerField(null=True, blank=True)
    expiry_notice_sent_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__slug", "flavor__cluster__name", "flavor__name"]
        constraints = [models.UniqueConstraint(fields=["team", "flavor"], name="one_quota_per_team_flavor")]

    def __str__(self):
        return f"{self.team.slug}: {self.guaranteed}+{self.burst} {self.flavor.name}"


class QuotaLevel(models.Model):
    """What a team was guaranteed, and could borrow, of one flavor from `since` until its next level: the history
    that evidence on a request reads. Written by every service that changes a quota's guaranteed or burst."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE, related_name="+")
    guaranteed = models.PositiveIntegerField()
    burst = models.PositiveIntegerField()
    since = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["team", "flavor", "since"])]

    def __str__(self):
        return f"{self.team_id}/{self.flavor_id}: {self.guaranteed}+{self.burst} from {self.since:%Y-%m-%d %H:%M}"


class QuotaRequest(Amounts):
    """A team's ask for a new amount of one flavor, and the platform team's decision on it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_requests")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="quota_requests")
    justification = models.TextField(validators=[MinLengthValidator(10)])
    ends_at = models.DateTimeField(null=True, blank=True, help_text="For a time-boxed grant: when it reverts.")
    state = models.CharField(max_length=20, choices=RequestState.choices, default=RequestState.PENDING,
                             db_index=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    requested_at = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    # What was granted: an admin may approve adjusted amounts.
    granted_guaranteed = models.PositiveIntegerField(null=True, blank=True)
    granted_burst = models.PositiveIntegerField(null=True, blank=True)
    renewal_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-requested_at", "-id"]

    def __str__(self):
        return f"#{self.pk} {self.team.slug}: {self.guaranteed}+{self.burst} {self.flavor.name} ({self.state})"

    def clean(self):
        if self.ends_at and self.ends_at <= timezone.now() and self.state == RequestState.PENDING:
            raise ValidationError({"ends_at": "The end date must be in the future."})


class Reservation(models.Model):
    """Units of a flavor a team books for a future window [starts_at, ends_at): decided like a quota request; at
    its start the team's guaranteed quota rises by `units`, at its end it comes down again."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="reservations")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="reservations")
    units = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(MAX_UNITS)])
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    justification = models.TextField(validators=[MinLengthValidator(10)])
    state = models.CharField(max_length=16, choices=ReservationState.choices, default=ReservationState.PENDING)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    requested_at = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    end_notice_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["starts_at", "pk"]
        constraints = [models.CheckConstraint(condition=Q(ends_at__gt=F("starts_at")), name="reservation_not_empty")]
        indexes = [models.Index(fields=["flavor", "state", "starts_at"]), models.Index(fields=["state", "ends_at"])]

    def __str__(self):
        return (f"#{self.pk} {self.team.slug}: {self.units} {self.flavor.name} "
                f"{self.starts_at:%Y-%m-%d %H:%M}–{self.ends_at:%Y-%m-%d %H:%M} ({self.state})")

    def clean(self):
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            raise ValidationError({"ends_at": "The window must end after it starts."})
