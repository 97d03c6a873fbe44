import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from portal.reconciled import Reconciled
from tenants.models import Cluster, GpuFlavor, PriorityTier, Team, dns_label

from .choices import TERMINAL_STATES, JobKind, JobState, Placement, WaitReason
from .manifests import job_object_name

# Matched whole (fullmatch): `$` would also match before a final newline, letting "NAME\n" through.
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An image reference: [registry[:port]/]path[:tag][@digest]; no whitespace or shell metacharacters.
IMAGE_RE = re.compile(r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[\w][\w.-]{0,127})?"
                      r"(@sha256:[a-f0-9]{64})?", re.ASCII)
MAX_WORKERS = 256
MAX_ARGV_ITEMS = 200


def validate_argv(value) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError("A list of strings (each one argument; nothing is run through a shell).")
    if len(value) > MAX_ARGV_ITEMS or any(len(item) > 4096 or "\x00" in item for item in value):
        raise ValidationError(f"At most {MAX_ARGV_ITEMS} arguments of 4096 characters each.")


def validate_env(value) -> None:
    if not isinstance(value, dict):
        raise ValidationError("A map of variable names to values.")
    for name, item in value.items():
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
            raise ValidationError(f"'{name}' is not a valid environment variable name (letters, digits, '_').")
        if not isinstance(item, str):
            raise ValidationError(f"The value of {name} must be a string.")


IMAGE_MESSAGE = "Use an image reference like registry.example.com/team/train:1.2 (no spaces or shell characters)."


def validate_image(value: str) -> None:
    if not IMAGE_RE.fullmatch(value):
        raise ValidationError(IMAGE_MESSAGE)


class JobTemplate(models.Model):
    """A team's saved starting point for the submit form."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="job_templates")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=JobKind.choices)
    values = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="template_unique_name_per_team")]

    def __str__(self):
        return f"{self.team.slug}/{self.name}"


class Job(Reconciled):
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="jobs")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="jobs")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="jobs")
    priority_tier = models.ForeignKey(PriorityTier, on_delete=models.PROTECT, related_name="jobs")
    kind = models.CharField(max_length=20, choices=JobKind.choices)
    name = models.CharField(max_length=40, validators=[dns_label])
    image = models.CharField(max_length=300, validators=[validate_image])
    command = models.JSONField(default=list, blank=True, validators=[validate_argv])
    args = models.JSONField(default=list, blank=True, validators=[validate_argv])
    env = models.JSONField(default=dict, blank=True, validators=[validate_env])
    workers = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_WORKERS)])
    gpus_per_worker = models.PositiveIntegerField(default=1, validators=[MaxValueValidator(64)])
    cpu_per_worker = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1), MaxValueValidator(512)])
    memory_gib_per_worker = models.PositiveIntegerField(
        default=64, validators=[MinValueValidator(1), MaxValueValidator(4096)]
    )
    max_runtime_minutes = models.PositiveIntegerField(
        default=24 * 60, validators=[MinValueValidator(1), MaxValueValidator(30 * 24 * 60)]
    )
    state = models.CharField(max_length=20, choices=JobState.choices, default=JobState.PENDING, db_index=True)
    state_message = models.TextField(blank=True)
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    submitted_at = models.DateTimeField(default=timezone.now, db_index=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_reason = models.CharField(max_length=300, blank=True,
                                     help_text="Why the portal stopped it (the idle rule; its workspace suspended).")
    resubmit_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    notify = models.BooleanField(default=True, help_text="Email the submitter when the job ends or is preempted.")
    spot_allowed = models.BooleanField(
        default=False, help_text="May run on spot capacity when reserved is full; spot can be evicted at any time.",
    )
    topology_level = models.CharField(
        max_length=63, blank=True, help_text="Keep every worker within one domain of this level (e.g. rack).",
    )
    topology_mode = models.CharField(max_length=10, choices=Placement.choices, blank=True)
    placement = models.JSONField(
        default=dict, blank=True, editable=False,
        help_text="Where the cluster placed the job and why: flavor, spot or not, topology domain, eviction.",
    )
    estimate = models.JSONField(
        default=dict, blank=True, editable=False,
        help_text="When it will likely start (waiting) or end (running), recomputed when its cluster changes: "
                  "earliest, likely, latest, basis and a sentence; or why it cannot start under today's quotas.",
    )
    # The latest progress the job's own code reported (Portal.report_progress): only the latest report is kept, as
    # Kubeflow Trainer's TrainJob status.trainerStatus keeps one; `progress_reports` counts the reports of the same
    # total since it last changed, so the forecast can tell a trend from a single number.
    progress_done = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    progress_total = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    progress_at = models.DateTimeField(null=True, blank=True, editable=False)
    progress_reports = models.PositiveIntegerField(default=0, editable=False)
    kept_object_name = models.CharField(
        max_length=63, blank=True, editable=False,
        help_text="The name its objects were given under an earlier naming rule; empty when derived as today.",
    )

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            # The job list's order within a team: a page is read straight off the index, however deep.
            models.Index(fields=["team", "-submitted_at", "-id"], name="job_team_newest_first"),
            models.Index(fields=["cluster", "state"]),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(progress_total__isnull=True)
                | models.Q(progress_total__gt=0, progress_done__lte=models.F("progress_total")),
                name="job_progress_within_total"),
        ]

    def __str__(self):
        return f"{self.team.slug}/{self.object_name}"

    @property
    def object_name(self) -> str:
        """The Kubernetes name of the job's objects. A name once given to the cluster never changes (the status
        sync finds the objects by it), so rows named under an earlier rule keep theirs."""
        return self.kept_object_name or job_object_name(self.name, self.pk)

    @property
    def total_gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def queue_wait_seconds(self) -> float | None:
        if self.admitted_at is None:
            return None
        # Rows synced before admission times were clamped to the submission may say a second earlier.
        return max(0.0, (self.admitted_at - self.submitted_at).total_seconds())

    @property
    def progress(self) -> float | None:
        """The share done by the latest report, 0 to 1; None before any."""
        if not self.progress_total:
            return None
        return self.progress_done / self.progress_total

    @property
    def run_seconds(self) -> float | None:
        if self.started_at is None:
            return None
        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds()


class JobWait(models.Model):
    """One stretch of a job's wait with one reason, as the status sync saw it begin and end (open while it lasts).
    A job's timeline says how long it waited; these say why, so unmet demand can be split by reason."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="waits")
    reason = models.CharField(max_length=16, choices=WaitReason.choices)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["started_at"]), models.Index(fields=["job", "ended_at"])]

    def __str__(self):
        return f"job {self.job_id} waited for {self.reason} from {self.started_at:%Y-%m-%d %H:%M}"
