"""The controllers lane (`make test-controllers`, marker `controllers`): the portal's jobs judged by the real Kueue
and Volcano (tools/controllers) on a real control plane (tools/controlplane), with kwok's fake GPU nodes. Each
test gets a fresh cluster with only the scheduler it needs, so no test sees another's queues or jobs. CI sets
REQUIRE_CONTROLLERS, so there a binary that was not built fails the lane instead of skipping it."""

import os
import time

import pytest

from jobs import sync as job_sync
from jobs.models import Job
from portal import kube
from tests.jobs.conftest import reconcile_cluster
from tests.requires import unavailable


def _start(schedulers, crds_dir, settings):
    from tools import controllers, controlplane

    if missing := controlplane.missing_binaries() + controllers.missing_binaries(schedulers):
        unavailable(f"{', '.join(missing)} not built: run `make controllers-bin` (needs Go)",
                    flag="REQUIRE_CONTROLLERS")
    plane = controlplane.start(crds_dir=crds_dir)
    try:
        controllers.start(plane, schedulers)
    except BaseException:
        plane.stop()
        raise
    settings.KUBECONFIG = str(plane.kubeconfig)
    kube.forget_clients()
    return plane


@pytest.fixture
def kueue_cluster(crds_dir, settings):
    plane = _start(("kueue",), crds_dir, settings)
    yield plane
    kube.forget_clients()
    plane.stop()


@pytest.fixture
def volcano_cluster(crds_dir, settings):
    plane = _start(("volcano",), crds_dir, settings)
    yield plane
    kube.forget_clients()
    plane.stop()


def flavor_nodes(plane, flavor, *, cpu: int = 96, memory_gib: int = 1024, extra_labels=None) -> list[str]:
    """The flavor's GPUs as fake nodes: capacity / gpus_per_node nodes with its labels and taints."""
    from tools import controllers

    names = []
    for index in range(flavor.capacity // flavor.gpus_per_node):
        name = f"{flavor.name}-{index}"
        labels = {**flavor.node_labels, **((extra_labels or {}).get(index, {}))}
        controllers.add_node(plane, name, labels=labels, taints=list(flavor.node_taints or []), allocatable={
            flavor.resource_name: flavor.gpus_per_node, "cpu": cpu, "memory": f"{memory_gib}Gi", "pods": 110})
        names.append(name)
    return names


def build_real_world(plane, scheduler: str, *, guaranteed: int = 8, burst: int = 8, nodes: bool = True) -> dict:
    """tests.jobs.conftest.build_world on the real cluster: the same rows, the cluster registered by kubeconfig
    context, and the flavor's nodes created for kwok."""
    from quotas import services as quota_services
    from tenants.choices import Role
    from tests.factories import (
        ClusterFactory,
        GpuFlavorFactory,
        MembershipFactory,
        PlatformAdminFactory,
        PriorityTierFactory,
        TeamFactory,
        TeamNamespaceFactory,
    )
    from tools import controlplane

    cluster = ClusterFactory(connection="kubeconfig", server="", context=controlplane.CONTEXT, scheduler=scheduler,
                             cohort="gpu" if scheduler == "kueue" else "")
    flavor = GpuFlavorFactory(cluster=cluster, name="h100", gpus_per_node=8, capacity=64)
    if nodes:
        flavor_nodes(plane, flavor)
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


def sync(world) -> dict[int, Job]:
    job_sync.job_status_sync(cluster=world["cluster"])
    return {job.pk: job for job in Job.objects.all()}


def sync_until(world, done, *, timeout: float = float(os.environ.get("CONTROLLERS_WAIT", 90)), what: str = ""):
    """Sync the jobs' status from the cluster until `done(rows)` holds; the controllers work at their own pace."""
    deadline = time.monotonic() + timeout
    while True:
        rows = sync(world)
        if done(rows):
            return rows
        if time.monotonic() > deadline:
            states = {pk: (row.state, row.state_message) for pk, row in rows.items()}
            raise AssertionError(f"not reached within {timeout:g} s: {what or done}; jobs: {states}")
        time.sleep(0.5)


def wait_for(check, *, timeout: float = 60, what: str = ""):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout:g} s: {what}")
        time.sleep(0.5)


def add_team(world, slug: str, *, guaranteed: int, burst: int) -> dict:
    """A second team on the same cluster and flavor (the same cohort under Kueue), with a member; reconciled."""
    from quotas import services as quota_services
    from tenants.choices import Role
    from tests.factories import MembershipFactory, PlatformAdminFactory, TeamFactory, TeamNamespaceFactory

    team = TeamFactory(slug=slug)
    TeamNamespaceFactory(team=team, cluster=world["cluster"])
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    quota_services.quota_set(actor=PlatformAdminFactory(), team=team, flavor=world["flavor"], guaranteed=guaranteed,
                             burst=burst, cpu_cores=256, memory_gib=4096)
    reconcile_cluster(world["cluster"])
    return {**world, "team": team, "member": member}
