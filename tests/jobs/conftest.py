import pytest

from composition import reconcile
from portal import kube
from quotas import services as quota_services
from tenants.choices import Role
from tenants.models import TeamNamespace
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
)

T0 = 1_800_000_000.0


@pytest.fixture
def simulating_sandbox():
    """A sandbox that runs jobs; the test steps its clock (`step(sb, seconds)`): jobs start 5 s after admission
    and run 100 s."""
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sb:
        yield sb
    kube.forget_clients()


@pytest.fixture(params=["permissive", "upstream CRDs"])
def any_simulating_sandbox(request):
    """The simulating sandbox with the built-in kinds and, where CRDS_DIR is set, validating what the simulator
    writes (Volcano and KubeRay statuses) against the upstream CRDs."""
    from sandbox import Sandbox

    crd_dirs = [request.getfixturevalue("crds_dir")] if request.param == "upstream CRDs" else []
    with Sandbox(crd_dirs=crd_dirs, builtin_custom_kinds=True, simulate=True, tick=None,
                 simulation={"duration": 100, "startup": 5}) as sb:
        yield sb
    kube.forget_clients()


def step(sb, seconds: float) -> None:
    sb.simulator.step(T0 + seconds)


def reconcile_cluster(cluster) -> None:
    reconcile.cluster_reconcile(cluster_id=cluster.pk)
    for row in TeamNamespace.objects.filter(cluster=cluster):
        reconcile.team_namespace_reconcile(team_namespace_id=row.pk)


def build_world(url: str, scheduler: str, *, guaranteed: int = 8, burst: int = 8) -> dict:
    """One cluster, one h100 flavor, team nlp with a member and quota, three tiers; cluster objects applied."""
    cluster = ClusterFactory(server=url, scheduler=scheduler, cohort="gpu" if scheduler == "kueue" else "")
    flavor = GpuFlavorFactory(cluster=cluster, name="h100", gpus_per_node=8, capacity=64)
    tiers = {name: PriorityTierFactory(name=name, value=value, preemption_policy=policy, is_default=default)
             for name, value, policy, default in (("urgent", 100000, "PreemptLowerPriority", False),
                                                  ("standard", 10000, "PreemptLowerPriority", True),
                                                  ("preemptible", 1000, "Never", False))}
    team = TeamFactory(slug="nlp")
    TeamNamespaceFactory(team=team, cluster=cluster)
    member = MembershipFactory(team=team, role=Role.MEMBER, user__email="erin@example.com").user
    quota_services.quota_set(actor=PlatformAdminFactory(), team=team, flavor=flavor, guaranteed=guaranteed,
                             burst=burst, cpu_cores=256, memory_gib=4096)
    reconcile_cluster(cluster)
    return {"cluster": cluster, "flavor": flavor, "team": team, "tiers": tiers, "member": member}
