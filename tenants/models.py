import re
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from portal.reconciled import Reconciled

from .choices import (
    BudgetHoldAction,
    Connection,
    IdleAction,
    MembershipSource,
    MigStrategy,
    PreemptionPolicy,
    Role,
    Scheduler,
    Sharing,
    TeamState,
)
from .records import AccessToken, AuditEvent, IdempotencyKey, TeamWebhook, WebhookDelivery  # noqa: F401 - registered here
from .sharing import CEL_MAX_LENGTH, SHARED, dns_subdomain, validate_sharing
from .topology import is_label_key, is_label_value, toleration_problem, validate_topology_levels

DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
dns_label = RegexValidator(
    DNS_LABEL_RE,
    "Use lowercase letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label).",
)
# Extended resource names as the device plugin registers them: nvidia.com/gpu, nvidia.com/mig-1g.10gb, ...
resource_name = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$",
    "Use an extended resource name such as nvidia.com/gpu or nvidia.com/mig-1g.10gb.",
)
RESERVED_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}


def namespace_for(slug: str) -> str:
    return f"{settings.NAMESPACE_PREFIX}{slug}"


def validate_team_slug(slug: str) -> None:
    name = namespace_for(slug)
    if len(name) > 63:
        limit = 63 - len(settings.NAMESPACE_PREFIX)
        raise ValidationError(f"At most {limit} characters: the namespace '{name[:20]}…' must fit 63.")
    if not DNS_LABEL_RE.match(name):
        raise ValidationError(
            "Use lowercase letters, digits and '-', starting and ending with a letter or digit."
        )
    if name in RESERVED_NAMESPACES or name.startswith("kube-") or name.startswith("openshift-"):
        raise ValidationError(f"'{name}' is reserved for the cluster itself.")


class Cluster(Reconciled):
    """A Kubernetes cluster the portal manages; its own row reconciles the cluster-wide objects.

    Settings only one app above reads live in that app's one-to-one table (billing's usage source, registered in
    cluster_parts). The rest stay here: the cohort, the overcommit ratio and the topology levels are validated by
    tenancy's own checks and read by several apps, and the flavors Kueue is making again are reconcile state written
    under this row's lock.
    """

    name = models.CharField(max_length=63, unique=True, validators=[dns_label])
    display_name = models.CharField(max_length=100, blank=True)
    connection = models.CharField(max_length=20, choices=Connection.choices, default=Connection.SANDBOX)
    server = models.URLField(blank=True, help_text="API server URL of a sandbox cluster.")
    context = models.CharField(max_length=200, blank=True, help_text="Kubeconfig context.")
    scheduler = models.CharField(max_length=20, choices=Scheduler.choices, default=Scheduler.KUEUE)
    cohort = models.CharField(
        max_length=63,
        blank=True,
        validators=[dns_label],
        help_text="Kueue cohort that the teams' ClusterQueues share (or Volcano parent queue).",
    )
    overcommit = models.DecimalField(
        max_digits=4,
        decimal_places=2,
        default=Decimal("1.00"),
        validators=[MinValueValidator(Decimal("0.10")), MaxValueValidator(Decimal("10.00"))],
        help_text="Σ guaranteed may reach capacity × this ratio.",
    )
    mig_strategy = models.CharField(
        max_length=10, choices=MigStrategy.choices, default=MigStrategy.MIXED,
        help_text="The GPU Operator's mig.strategy: the resource name and node labels MIG flavors are scheduled by.",
    )
    topology_levels = models.JSONField(
        default=list, blank=True, validators=[validate_topology_levels],
        help_text="Topology levels from node labels, broadest first: [{\"name\": \"rack\", \"node_label\": "
                  "\"topology.example.com/rack\"}, ...]. Jobs may keep their workers within one.",
    )
    # Kueue flavors being made again because a field Kueue keeps as made must change (backends.kueue): out of
    # every ClusterQueue until Kueue has let them go.
    replacing_flavors = models.JSONField(default=list, blank=True, editable=False)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.display_name or self.name

    def clean(self):
        if self.connection == Connection.SANDBOX and not self.server:
            raise ValidationError({"server": "A sandbox cluster needs its API server URL."})
        if self.connection == Connection.KUBECONFIG and not self.context:
            raise ValidationError({"context": "Name the kubeconfig context to use."})


class GpuFlavor(models.Model):
    """A kind of GPU capacity in one cluster: whole GPUs, MIG slices, shares of a GPU (time-slicing, MPS) or the
    devices of a DRA DeviceClass (see tenants.sharing)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="flavors")
    name = models.CharField(max_length=63, validators=[dns_label])
    resource_name = models.CharField(max_length=100, validators=[resource_name], default="nvidia.com/gpu")
    gpu_model = models.CharField(max_length=100, blank=True)
    node_labels = models.JSONField(default=dict, blank=True)
    node_taints = models.JSONField(default=list, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    capacity = models.PositiveIntegerField(
        help_text="Units of this resource in the cluster: GPUs, slices, shares (GPUs × replicas) or DRA devices.")
    gpus_per_node = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    memory_gb = models.PositiveIntegerField(default=80)
    gpu_fraction = models.DecimalField(
        max_digits=6, decimal_places=4, default=Decimal("1"),
        validators=[MinValueValidator(Decimal("0.0001")), MaxValueValidator(Decimal("1"))],
        help_text="The part of a full GPU one unit is (1 for a whole GPU, 1/7 for a 1g MIG slice).",
    )
    sharing = models.CharField(max_length=20, choices=Sharing.choices, default=Sharing.EXCLUSIVE)
    replicas = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(2)],
        help_text="Time-slicing and MPS: replicas the device plugin advertises per GPU (its sharing "
                  "resources[].replicas, at least 2); capacity then counts shares.",
    )
    device_class = models.CharField(
        max_length=253, blank=True, validators=[dns_subdomain],
        help_text="Dynamic Resource Allocation: the DeviceClass claims ask for, e.g. gpu.nvidia.com or mig.nvidia.com.",
    )
    device_selector = models.TextField(
        blank=True, max_length=CEL_MAX_LENGTH,
        help_text="Dynamic Resource Allocation: an optional CEL expression narrowing the class's devices "
                  "(GPU model, memory).",
    )
    mig_slices_per_gpu = models.PositiveSmallIntegerField(
        default=7, null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(8)],
        help_text="Compute slices of the whole GPU (7 on A100/H100, 4 on A30; empty: 7): a MIG unit is its "
                  "profile's slices over this, exactly.",
    )
    spot = models.BooleanField(
        default=False,
        help_text="Spot or preemptible capacity: tried after reserved flavors, only by jobs that allow it, "
                  "evicted when the provider reclaims it, and billed at its own rate.",
    )

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="flavor_unique_name_per_cluster"),
            models.UniqueConstraint(
                fields=["cluster", "resource_name", "node_labels"], name="flavor_unique_resource_per_pool"
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.resource_name})"

    def clean(self):
        if not isinstance(self.node_labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.node_labels.items()
        ):
            raise ValidationError({"node_labels": "Node labels are a map of strings to strings."})
        if len(self.node_labels) > 8:
            raise ValidationError({"node_labels": "At most 8 node labels (Kueue's limit)."})
        for field in ("node_taints", "tolerations"):
            items = getattr(self, field)
            if not isinstance(items, list) or not all(isinstance(t, dict) for t in items):
                raise ValidationError({field: "A list of objects."})
        if any(not t.get("key") or t.get("effect") not in {"NoSchedule", "PreferNoSchedule", "NoExecute"}
               for t in self.node_taints):
            raise ValidationError({"node_taints": "Each taint needs a key and an effect."})
        # Pods of the flavor carry these as nodeSelector and tolerations: refused by the API server unless valid.
        bad = [f"{k}={v}" for k, v in self.node_labels.items() if not is_label_key(k) or not is_label_value(v)]
        if bad:
            raise ValidationError({"node_labels": f"Not Kubernetes labels: {', '.join(bad)} (keys like "
                                                  "example.com/name, values ≤ 63 of A-Z a-z 0-9 - _ .)."})
        as_tolerations = [{"key": t.get("key"), "operator": "Equal" if t.get("value") else "Exists",
                           "value": t.get("value"), "effect": t.get("effect")} for t in self.node_taints]
        for field, items in (("node_taints", as_tolerations), ("tolerations", self.tolerations)):
            problems = [p for p in map(toleration_problem, items) if p]
            if problems:
                raise ValidationError({field: "; ".join(problems)})
        validate_sharing(self)
        if self.sharing in SHARED and self.replicas:
            self.gpu_fraction = self.fraction_decimal  # a share is 1/replicas of its GPU

    # A MIG flavor is its GPU model and profile; its resource name is kept in the `mixed` spelling, and the cluster's
    # strategy decides what pods and quotas ask for.

    @property
    def mig_profile(self) -> str:
        """'1g.10gb' for nvidia.com/mig-1g.10gb; '' for anything else."""
        match = MIG_RESOURCE.match(self.resource_name or "")
        return match[1] if match and self.sharing == Sharing.MIG else ""

    @property
    def fraction(self) -> Fraction:
        """The exact part of a whole GPU one unit is: 1/7 for a 1g slice of an A100, so 7 slices cost one GPU."""
        profile = MIG_PROFILE.match(self.mig_profile)
        if profile:
            slices = self.mig_slices_per_gpu or 7
            return Fraction(min(int(profile[1]), slices), slices)
        if self.sharing in SHARED and self.replicas:
            return Fraction(1, self.replicas)
        return Fraction(Decimal(self.gpu_fraction))

    @property
    def unit_word(self) -> str:
        """What one unit of capacity is called: a whole GPU, a MIG slice, a time-sliced or MPS share, a DRA device."""
        if self.sharing == Sharing.MIG or self.mig_profile:
            return "slices"
        if self.sharing in SHARED:
            return "shares"
        if self.sharing == Sharing.DRA:
            return "devices"
        return "GPUs"

    @property
    def gpu_equivalents(self) -> Fraction:
        """The flavor's capacity in whole GPUs (7 1g slices of an A100 are one), so flavors of a cluster add up."""
        return self.capacity * self.fraction

    @property
    def fraction_decimal(self) -> Decimal:
        return (Decimal(self.fraction.numerator) / Decimal(self.fraction.denominator)).quantize(Decimal("0.0001"))

    def scheduled_resource(self, strategy: str) -> str:
        """The extended resource a pod or quota asks for under the cluster's MIG strategy."""
        return "nvidia.com/gpu" if self.mig_profile and strategy == MigStrategy.SINGLE else self.resource_name

    def scheduled_node_labels(self, strategy: str) -> dict:
        """Node labels of the flavor; under `single`, also the product label GPU Feature Discovery gives nodes whose
        GPUs are cut into this profile: the model with spaces as dashes, then -MIG-<profile> (k8s-device-plugin
        internal/lm/resource.go, productLabel)."""
        labels = dict(self.node_labels or {})
        if self.mig_profile and strategy == MigStrategy.SINGLE and self.gpu_model:
            labels[GPU_PRODUCT_LABEL] = "-".join([self.gpu_model.replace(" ", "-"), "MIG", self.mig_profile])
        return labels


MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb(?:\+[a-z0-9.]+)?)$")
MIG_PROFILE = re.compile(r"^(\d+)g\.")
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


class PriorityTier(models.Model):
    """A priority level offered to every team; becomes a PriorityClass (and a WorkloadPriorityClass)."""

    name = models.CharField(max_length=50, unique=True, validators=[dns_label])
    value = models.IntegerField(validators=[MinValueValidator(0), MaxValueValidator(1_000_000_000)])
    preemption_policy = models.CharField(
        max_length=30, choices=PreemptionPolicy.choices, default=PreemptionPolicy.PREEMPT_LOWER
    )
    description = models.CharField(max_length=200, blank=True)
    is_default = models.BooleanField(default=False)
    idle_action = models.CharField(
        max_length=10, choices=IdleAction.choices, default=IdleAction.NONE, blank=True,
        help_text="What the idle rule does to running batch jobs of this tier whose GPUs do no work: nothing, warn "
                  "their submitters, or warn and then stop them (for preemptible tiers).",
    )
    budget_hold_action = models.CharField(
        max_length=10, choices=BudgetHoldAction.choices, default=BudgetHoldAction.CONTINUE, blank=True,
        help_text="What a team's budget hold does to its running batch jobs of this tier: they keep running, or "
                  "(for preemptible tiers) their submitters are told, and after BUDGET_HOLD_SUSPEND_MINUTES they "
                  "are stopped and resubmitted to start when the hold lifts.",
    )

    class Meta:
        ordering = ["-value"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=models.Q(is_default=True), name="one_default_tier"
            )
        ]

    def __str__(self):
        return self.name


class Team(models.Model):
    slug = models.CharField(
        max_length=63, unique=True, validators=[validate_team_slug], help_text="Becomes the namespace."
    )
    name = models.CharField(max_length=100)
    cost_center = models.CharField(max_length=50, blank=True)
    idp_group = models.CharField(
        max_length=200, blank=True, help_text="Identity-provider group bound to the team's roles."
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    state = models.CharField(max_length=20, choices=TeamState.choices, default=TeamState.ACTIVE)
    namespace_deletion_confirmed_at = models.DateTimeField(null=True, blank=True)
    fair_share_weight = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(65535)],
        help_text="The team's weight when busy teams share what is free: Kueue fairSharing.weight, Volcano queue "
                  "weight (1 to 65535, Volcano's range).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.name

    @property
    def namespace(self) -> str:
        return namespace_for(self.slug)

    def clean(self):
        if self.idp_group.startswith("system:"):
            raise ValidationError({"idp_group": "Group names starting with 'system:' are reserved."})
        if self.parent_id and self.parent_id == self.pk:
            raise ValidationError({"parent": "A team cannot be its own department."})


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)
    # Single sign-on adds and removes only the memberships it manages; one added by hand stays as it is.
    source = models.CharField(max_length=10, choices=MembershipSource.choices, default=MembershipSource.LOCAL)

    class Meta:
        ordering = ["team__slug", "user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")]

    def __str__(self):
        return f"{self.user} in {self.team} ({self.role})"


class TeamNamespace(Reconciled):
    """A team's namespace in one cluster: the unit of reconcile for everything the team owns there."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="namespaces")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="team_namespaces")
    deleted_at = models.DateTimeField(null=True, blank=True)
    usage = models.JSONField(
        default=dict, blank=True, help_text="GPU units in use per resource, as the cluster's ResourceQuota reports."
    )
    quota_status = models.JSONField(
        default=dict, blank=True,
        help_text="What the cluster reports for the team's quota objects: the ResourceQuota's enforced `hard` GPU "
                  "limits and `used` units, and units in use per flavor (Kueue ClusterQueue) or per resource "
                  "(Volcano Queue).",
    )

    class Meta:
        ordering = ["team__slug", "cluster__name"]
        constraints = [models.UniqueConstraint(fields=["team", "cluster"], name="one_namespace_per_cluster")]

    def __str__(self):
        return f"{self.team.namespace}@{self.cluster.name}"
