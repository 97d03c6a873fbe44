"""What a team's quota is in one cluster, as frozen values: the input of the core quota builders
(`quotas.manifests`) and of each backend's queue builders alike."""

from dataclasses import dataclass, field

from portal.naming import dns_name
from tenants.choices import Sharing
from tenants.sharing import DEVICES_SUFFIX


def gib(value: int) -> str:
    """`value` GiB as kube-apiserver writes a quantity back (Quantity.String(): the largest binary unit with a whole
    amount, so 4096Gi is 4Ti): an object holding it then reads back as written, and a sweep finds nothing to redo."""
    if not value:
        return "0"  # Quantity.String() of zero, whatever its unit
    units = ["Gi", "Ti", "Pi", "Ei"]
    unit = 0
    while value and value % 1024 == 0 and unit < len(units) - 1:
        value, unit = value // 1024, unit + 1
    return f"{value}{units[unit]}"


@dataclass(frozen=True)
class FlavorSpec:
    name: str
    resource_name: str
    gpus_per_node: int
    node_labels: dict = field(default_factory=dict)
    node_taints: list = field(default_factory=list)
    tolerations: list = field(default_factory=list)
    spot: bool = False
    topology: str = ""  # the Kueue Topology its nodes are described by (TAS), when the cluster has levels
    device_class: str = ""  # a DRA flavor: resource_name is the logical name Kueue's deviceClassMappings give it

    @property
    def quota_key(self) -> str:
        """Its ResourceQuota entry: `requests.<extended resource>`, or a DRA class's devices (kubernetes
        pkg/quota/v1/evaluator/core/resource_claims.go: `<class>.deviceclass.resource.k8s.io/devices`)."""
        return f"{self.device_class}{DEVICES_SUFFIX}" if self.device_class else f"requests.{self.resource_name}"

    @property
    def volcano_key(self) -> str:
        """Its Volcano Queue resource: a DRA class counts as `deviceclass/<class>` (volcano
        pkg/scheduler/plugins/capacity/capacity.go, DeviceClassCountPrefix; the capacity plugin only)."""
        return f"deviceclass/{self.device_class}" if self.device_class else self.resource_name


@dataclass(frozen=True)
class QuotaSpec:
    flavor: FlavorSpec
    guaranteed: int
    burst: int
    cpu_cores: int = 0
    memory_gib: int = 0
    storage_gib: int = 0


@dataclass(frozen=True)
class TeamQuotaSpec:
    """A team's holdings in one cluster, with every GPU flavor the cluster offers (for zero limits)."""

    slug: str
    namespace: str
    quotas: tuple[QuotaSpec, ...]
    cluster_flavors: tuple[FlavorSpec, ...]
    cohort: str = ""
    held: bool = False  # a suspended team: admit nothing new
    weight: int = 1  # fair-sharing weight among the teams of its cohort / parent queue
    admission_checks: tuple[str, ...] = ()  # checks its queue lists (the portal's budget check, when enforced)

    @property
    def queue_name(self) -> str:
        return dns_name(self.namespace)

    def totals(self) -> dict[str, int]:
        cpu = sum(q.cpu_cores for q in self.quotas)
        return {"cpu": cpu, "memory": sum(q.memory_gib for q in self.quotas),
                "storage": sum(q.storage_gib for q in self.quotas)}


def flavor_spec(flavor, strategy: str, topology: str = "") -> FlavorSpec:
    """A `tenants.models.GpuFlavor` as the cluster's MIG strategy schedules it (a MIG slice is nvidia.com/gpu under
    `single`)."""
    return FlavorSpec(
        spot=flavor.spot,
        topology=topology,
        name=flavor.name,
        resource_name=flavor.scheduled_resource(strategy),
        gpus_per_node=flavor.gpus_per_node,
        node_labels=flavor.scheduled_node_labels(strategy),
        node_taints=flavor.node_taints,
        tolerations=flavor.tolerations,
        device_class=flavor.device_class if flavor.sharing == Sharing.DRA else "",
    )
