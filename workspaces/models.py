from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from jobs.models import Job, validate_image
from portal.reconciled import Reconciled
from tenants.models import Cluster, GpuFlavor, PriorityTier, Team, dns_label

from .choices import LIVE_STAGES, Stage, Tool
from .manifests import port_forward_command, volume_name, workspace_object_name


class Workspace(Reconciled):
    """An interactive server (JupyterLab or code-server) with a home volume. Each time it runs, it is a job of kind
    `workspace` (`run`), queued under the team's quota like any job; suspending it ends the run and keeps the
    volume. The reconciled objects of this row are the volume claim, the Service and the Ingress."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="workspaces")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="workspaces")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="workspaces")
    priority_tier = models.ForeignKey(PriorityTier, on_delete=models.PROTECT, related_name="workspaces")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workspaces")
    name = models.CharField(max_length=40, validators=[dns_label])
    tool = models.CharField(max_length=20, choices=Tool.choices, default=Tool.JUPYTERLAB)
    image = models.CharField(max_length=300, validators=[validate_image])
    gpus = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(64)])
    cpu = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1), MaxValueValidator(512)])
    memory_gib = models.PositiveIntegerField(default=32, validators=[MinValueValidator(1), MaxValueValidator(4096)])
    volume_gib = models.PositiveIntegerField(default=50, validators=[MinValueValidator(1), MaxValueValidator(10240)])
    access_hash = models.CharField(max_length=200, editable=False,
                                   help_text="The access token as the tool checks it: a hash (shown once).")
    stage = models.CharField(max_length=12, choices=Stage.choices, default=Stage.ACTIVE, db_index=True)
    run = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    idle_since = models.DateTimeField(null=True, blank=True, help_text="Since when its GPUs have done no work.")
    warned_at = models.DateTimeField(null=True, blank=True)
    keep_until = models.DateTimeField(null=True, blank=True, help_text="Kept running, idle or not, until then.")
    suspended_at = models.DateTimeField(null=True, blank=True)
    volume_deleted_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    activity = models.JSONField(default=dict, blank=True, editable=False,
                                help_text="The last reading of its GPUs: signal, utilisation, verdict, when.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["team", "-created_at", "-id"], name="workspace_team_newest_first")]
        constraints = [models.UniqueConstraint(fields=["team", "cluster", "name"], condition=~models.Q(stage="deleted"),
                                               name="workspace_unique_live_name")]

    def __str__(self):
        return f"{self.team.slug}/{self.name}"

    @property
    def object_name(self) -> str:
        return workspace_object_name(self.name, self.pk)

    @property
    def volume_name(self) -> str:
        return volume_name(self.object_name)

    @property
    def live(self) -> bool:
        return self.stage in LIVE_STAGES

    @property
    def run_ended(self) -> bool:
        """Its server stopped by itself (exited, failed, ran out of time) while the workspace is live: Resume
        starts it again."""
        return self.live and self.run is not None and self.run.terminal

    @property
    def port_forward(self) -> str:
        return port_forward_command(namespace=self.team.namespace, name=self.object_name, tool=self.tool)
