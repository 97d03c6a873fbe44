"""Usage rows (one per team × flavor × hour, and per job), the collection ledger, rate cards and budgets.

Usage keeps the namespace it was measured in, so a team renamed or archived mid-month keeps its history.
"""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Round

from tenants.models import Cluster, GpuFlavor, Team

from .choices import BudgetMode, HourState, ScrapeShape, UtilisationSignal

GPU_HOURS = {"max_digits": 14, "decimal_places": 6}
# The activity field "used" was read from; '' on rows collected before the collector recorded it.
SIGNAL = {"max_length": 40, "choices": UtilisationSignal.choices, "blank": True}
MONEY = {"max_digits": 14, "decimal_places": 4}


class ClusterUsageSource(models.Model):
    """Where a cluster's GPU usage is read from, and how its series carry the pods' labels (one per cluster)."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, primary_key=True, related_name="usage_source")
    prometheus_url = models.URLField(blank=True)
    scrape_shape = models.CharField(
        max_length=10, choices=ScrapeShape.choices, default=ScrapeShape.EITHER, blank=True,
        help_text="The dcgm-exporter ServiceMonitor's honorLabels; left to detection, either is read.",
    )
    # What the last collection found in the series (the cluster page shows it beside the setting).
    scrape_shape_seen = models.CharField(max_length=10, choices=ScrapeShape.choices, blank=True, editable=False)
    scrape_shape_seen_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self):
        return f"usage source of {self.cluster_id}"


class UsageHour(models.Model):
    """What one team held and used of one flavor during one hour (UTC, start of the hour)."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="usage_hours")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="usage_hours")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="usage_hours")
    namespace = models.CharField(max_length=63)
    hour = models.DateTimeField()
    allocated_gpu_hours = models.DecimalField(**GPU_HOURS, validators=[MinValueValidator(Decimal(0))])
    used_gpu_hours = models.DecimalField(**GPU_HOURS, validators=[MinValueValidator(Decimal(0))])
    gpu_memory_used_gib_avg = models.FloatField(default=0)
    energy_kwh = models.DecimalField(**GPU_HOURS, default=Decimal(0))
    utilisation_signal = models.CharField(**SIGNAL)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "flavor", "hour"], name="usage_hour_unique"),
            models.CheckConstraint(condition=Q(used_gpu_hours__lte=F("allocated_gpu_hours")),
                                   name="usage_used_within_allocated"),
        ]
        indexes = [models.Index(fields=["hour", "team"]), models.Index(fields=["cluster", "hour"])]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.flavor_id}@{self.hour:%Y-%m-%d %H:00}"


class JobUsageHour(models.Model):
    """The part of a UsageHour that pods labelled with a portal job account for."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="usage_hours")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="+")
    hour = models.DateTimeField()
    allocated_gpu_hours = models.DecimalField(**GPU_HOURS)
    used_gpu_hours = models.DecimalField(**GPU_HOURS)
    utilisation_avg = models.FloatField(default=0, help_text="0..1 over the hour, weighted by GPUs held.")
    utilisation_signal = models.CharField(**SIGNAL)
    gpu_memory_used_gib_avg = models.FloatField(default=0, help_text="GPU memory the job's pods held, hour average.")
    # 0..1 like utilisation_avg; null where the exporter did not report the field that hour.
    sm_active_avg = models.FloatField(null=True, blank=True)
    tensor_active_avg = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "flavor", "hour"], name="job_usage_hour_unique")]
        indexes = [models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"job {self.job_id}/{self.flavor_id}@{self.hour:%Y-%m-%d %H:00}"


class CapacityHour(models.Model):
    """The GPU units of one flavor the exporters reported in one hour, and how much of it running pods held; the
    rest (unallocated) is the cluster's idle capacity. Allocated + unallocated = capacity, always."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="capacity_hours")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="capacity_hours")
    hour = models.DateTimeField()
    capacity_gpu_hours = models.DecimalField(**GPU_HOURS, validators=[MinValueValidator(Decimal(0))])
    allocated_gpu_hours = models.DecimalField(**GPU_HOURS, validators=[MinValueValidator(Decimal(0))])
    unallocated_gpu_hours = models.DecimalField(**GPU_HOURS, validators=[MinValueValidator(Decimal(0))])

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "flavor", "hour"], name="capacity_hour_unique"),
            models.CheckConstraint(
                # Rounded to the fields' places: SQLite (the demo) subtracts decimals as floats.
                condition=Q(unallocated_gpu_hours=Round(F("capacity_gpu_hours") - F("allocated_gpu_hours"),
                                                        GPU_HOURS["decimal_places"]),
                            unallocated_gpu_hours__gte=0),
                name="capacity_adds_up"),
        ]
        indexes = [models.Index(fields=["hour", "cluster"])]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.flavor_id}@{self.hour:%Y-%m-%d %H:00}"


class CollectedHour(models.Model):
    """The collection ledger: which hours of which cluster are known, and why the others are not."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="collected_hours")
    hour = models.DateTimeField()
    state = models.CharField(max_length=16, choices=HourState.choices)
    message = models.TextField(blank=True)
    # Steps of the hour an exporter did not answer (a partial hour bills the others until it is re-collected).
    steps_missing = models.PositiveSmallIntegerField(default=0)
    # The signal the hour's usage was read from, and every activity field the exporter reported all hour.
    utilisation_signal = models.CharField(**SIGNAL)
    activity_fields = models.JSONField(default=list, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    collected_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "hour"], name="collected_hour_unique")]
        indexes = [models.Index(fields=["state", "hour"])]

    def __str__(self) -> str:
        return f"{self.cluster_id}@{self.hour:%Y-%m-%d %H:00}: {self.state}"


class RateCard(models.Model):
    """The price of one GPU-hour of a flavor from `effective_from` (inclusive) until `effective_to` (exclusive)."""

    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="rate_cards")
    price_per_gpu_hour = models.DecimalField(**MONEY, validators=[MinValueValidator(Decimal(0))])
    currency = models.CharField(max_length=3, default="USD")
    effective_from = models.DateTimeField()
    effective_to = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["flavor", "effective_from"]
        constraints = [
            models.CheckConstraint(condition=Q(price_per_gpu_hour__gte=0), name="rate_card_price_not_negative"),
            models.CheckConstraint(condition=Q(effective_to__isnull=True) | Q(effective_to__gt=F("effective_from")),
                                   name="rate_card_period_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.flavor_id}: {self.price_per_gpu_hour} {self.currency}/GPU-h from {self.effective_from:%Y-%m-%d}"

    def clean(self) -> None:
        if self.effective_to and self.effective_from and self.effective_to <= self.effective_from:
            raise ValidationError({"effective_to": "The period must end after it starts."})


class Budget(models.Model):
    """What a team plans to spend in one month (`month` is the first day of it)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budgets")
    month = models.DateField()
    amount = models.DecimalField(**MONEY, validators=[MinValueValidator(Decimal("0.01"))])
    currency = models.CharField(max_length=3, default="USD")
    mode = models.CharField(max_length=8, choices=BudgetMode.choices, default=BudgetMode.NOTIFY)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "month"], name="budget_unique_per_month"),
            models.CheckConstraint(condition=Q(month__day=1), name="budget_month_is_first_day"),
        ]

    def __str__(self) -> str:
        return f"{self.team_id} {self.month:%Y-%m}: {self.amount} {self.currency}"


class BudgetAlert(models.Model):
    """A threshold (percent of the budget) crossed once; the row makes the alert fire exactly once."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(**MONEY)
    sent_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["budget", "threshold"], name="budget_alert_once")]

    def __str__(self) -> str:
        return f"budget {self.budget_id} ≥ {self.threshold} %"


class Allowance(models.Model):
    """How many GPU-hours of a flavor a team may use over a rolling window (the last `window_days` days); past it,
    the team's new work of that flavor is held before admission. GPU-hours are whole-GPU equivalents: an hour of a
    MIG slice counts its fraction of a GPU, as billing prices it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="allowances")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE, related_name="allowances")
    gpu_hours = models.DecimalField(max_digits=12, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))])
    window_days = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(366)])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team", "flavor"]
        constraints = [
            models.UniqueConstraint(fields=["team", "flavor"], name="allowance_unique_per_flavor"),
            models.CheckConstraint(condition=Q(gpu_hours__gt=0), name="allowance_positive"),
            models.CheckConstraint(condition=Q(window_days__gte=1, window_days__lte=366),
                                   name="allowance_window_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.flavor_id}: {self.gpu_hours} GPU-h per {self.window_days} d"


class BudgetOverride(models.Model):
    """A platform admin's one-off exception, until `expires_at`: extra GPU-hours on one flavor's allowance, extra
    money on the monthly budget, or (neither) every hold of the team lifted."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_overrides")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    extra_gpu_hours = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    extra_amount = models.DecimalField(**MONEY, null=True, blank=True)
    expires_at = models.DateTimeField()
    reason = models.CharField(max_length=300)
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    granted_at = models.DateTimeField()

    class Meta:
        ordering = ["-granted_at"]
        constraints = [
            models.CheckConstraint(condition=Q(extra_gpu_hours__isnull=True) | Q(extra_amount__isnull=True),
                                   name="override_one_kind"),
            models.CheckConstraint(condition=Q(extra_gpu_hours__isnull=True) | Q(flavor__isnull=False),
                                   name="override_hours_name_a_flavor"),
        ]
        indexes = [models.Index(fields=["team", "expires_at"])]

    def __str__(self) -> str:
        return f"override {self.team_id} until {self.expires_at:%Y-%m-%d %H:%M}"


class BudgetHold(models.Model):
    """A stretch during which a team's new work was held by its budget or an allowance; the open row (no
    `ended_at`) is what makes the team admins' e-mail go out once per hold, not once per job."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_holds")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField()

    class Meta:
        ordering = ["-started_at"]
        constraints = [models.UniqueConstraint(fields=["team"], condition=Q(ended_at__isnull=True),
                                               name="budget_hold_one_open")]

    def __str__(self) -> str:
        return f"hold {self.team_id} from {self.started_at:%Y-%m-%d %H:%M}"


class JobIdleWatch(models.Model):
    """The idle rule's memory of a running batch job whose tier lets it act: since when its GPUs do no work, when
    its submitter was warned, and the last reading. Gone once the GPUs work again."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="idle_watch")
    idle_since = models.DateTimeField()
    warned_at = models.DateTimeField(null=True, blank=True)
    activity = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"job {self.job_id} idle since {self.idle_since:%Y-%m-%d %H:%M}"
