"""The controllers lane (`make test-controllers`, marker `controllers`): the portal's jobs judged by the real Kueue
and Volcano (tools/controllers) on a real control plane (tools/controlplane), with kwok's fake GPU nodes. Each
test gets a fresh cluster with only the scheduler it needs, so no test sees another's queues or jobs. CI sets
REQUIRE_CONTROLLERS, so there a binary that was not built fails the lane instead of skipping it.

The scenarios (`scenarios.py`) run on two targets, the real controllers and the sandbox's simulator, and what each
showed is written to var/controllers/observations.json for `python -m bench.controllers` (bench/CONTROLLERS.md).
"""

import json
import os
import time
from pathlib import Path

import pytest

from composition import reconcile
from jobs import sync as job_sync
from jobs.models import Job
from portal import kube
from quotas import selectors as quota_selectors
from tests.jobs.conftest import reconcile_cluster
from tests.requires import unavailable

OBSERVATIONS = Path(__file__).resolve().parents[2] / "var" / "controllers" / "observations.json"
TARGETS = ("controllers", "simulator")
# The lane's DRA flavor: NVIDIA's driver's whole-GPU DeviceClass, counted by Kueue as the logical resource the
# flavor names (the portal's `deviceClassMappings` entry, backends.kueue.kueue_mapping), on two nodes of 8 devices.
DRA_FLAVOR = {"name": "h100-dra", "sharing": "dra", "device_class": "gpu.nvidia.com",
              "resource_name": "gpu.nvidia.com/devices", "gpus_per_node": 8, "capacity": 16}
DRA_NODES = 2


def portal_volcano_conf() -> dict:
    """The Volcano scheduler configuration the portal gives operators (`Volcano.scheduler_setup`), parsed."""
    import yaml

    from backends.volcano import BACKEND as VOLCANO_BACKEND

    [config] = [obj for obj in VOLCANO_BACKEND.scheduler_setup() if obj["kind"] == "ConfigMap"]
    return yaml.safe_load(config["data"]["volcano-scheduler.conf"])


def dra_mapping() -> dict:
    """What the portal tells an operator to add to Kueue's Configuration for the lane's DRA flavor."""
    from backends.kueue import kueue_mapping
    from tenants.models import GpuFlavor

    return kueue_mapping(GpuFlavor(**DRA_FLAVOR))


def _start(schedulers, crds_dir, settings, **options):
    from tools import controllers, controlplane

    if missing := controlplane.missing_binaries() + controllers.missing_binaries(schedulers):
        unavailable(f"{', '.join(missing)} not built: run `make controllers-bin` (needs Go)",
                    flag="REQUIRE_CONTROLLERS")
    plane = controlplane.start(crds_dir=crds_dir)
    try:
        controllers.start(plane, schedulers, **options)
    except BaseException:
        plane.stop()
        raise
    settings.KUBECONFIG = str(plane.kubeconfig)
    kube.forget_clients()
    return plane


class Target:
    """Where a scenario runs: `controllers` (a control plane with the real scheduler and kwok's nodes) or
    `simulator` (the sandbox with its Kueue and Volcano, ticking in real time; pods run until told otherwise)."""

    def __init__(self, kind: str, scheduler: str, crds_dir, settings, *, pods_ready_timeout: int | None = None,
                 ray: bool = False, dra: bool = False, volcano_setup: bool = False):
        """`pods_ready_timeout`: Kueue's waitForPodsReady timeout in seconds (its default is 30 minutes); on the
        simulator, pods then take a day to start, so only the timeout ends their wait. `ray`: the KubeRay operator
        runs beside the scheduler (the simulator writes KubeRay's part itself). `dra`: Kueue's Configuration maps
        the DRA flavor's DeviceClass (`dra_mapping`); the simulator publishes its own DRA driver's slices.
        `volcano_setup`: Volcano's scheduler runs with the configuration the portal gives operators
        (`Volcano.scheduler_setup`: the reclaim action, the capacity plugin) instead of its installer's."""
        self.kind, self.scheduler = kind, scheduler
        self.plane = self.sandbox = None
        if kind == "controllers":
            kueue_config = {}
            if pods_ready_timeout is not None:
                kueue_config["waitForPodsReady"] = {"timeout": f"{pods_ready_timeout}s"}
            if dra:
                kueue_config["resources"] = {"deviceClassMappings": [dra_mapping()]}
            self.plane = _start((scheduler, "kuberay") if ray else (scheduler,), crds_dir, settings,
                                kueue_config=kueue_config, dra=dra,
                                volcano_conf=portal_volcano_conf() if volcano_setup else None)
        else:
            from sandbox import Sandbox

            simulation = {"duration": 24 * 3600, "startup": 1}
            if pods_ready_timeout is not None:
                simulation |= {"startup": 24 * 3600, "pods_ready_timeout": pods_ready_timeout}
            if dra:
                mapping = dra_mapping()
                simulation |= {"dra_nodes": DRA_NODES, "dra_gpus_per_node": DRA_FLAVOR["gpus_per_node"],
                               "kueue_mappings": {cls: mapping["name"] for cls in mapping["deviceClassNames"]}}
            self.sandbox = Sandbox(crd_dirs=[crds_dir], builtin_custom_kinds=True, simulate=True, tick=0.2,
                                   simulation=simulation).start()
            if volcano_setup:
                # The simulator reads the same ConfigMap the portal gives operators.
                from backends.volcano import BACKEND as VOLCANO_BACKEND

                store = self.sandbox.store
                for obj in VOLCANO_BACKEND.scheduler_setup():
                    store.create(store.kind(obj["apiVersion"], obj["kind"]), obj)

    def cluster_fields(self) -> dict:
        from tools import controlplane

        if self.plane is not None:
            return {"connection": "kubeconfig", "server": "", "context": controlplane.CONTEXT}
        return {"server": self.sandbox.url}

    def add_node(self, name: str, *, labels: dict, taints: list, allocatable: dict) -> None:
        if self.plane is not None:
            from tools import controllers

            controllers.add_node(self.plane, name, labels=labels, taints=taints, allocatable=allocatable)
        else:
            from sandbox.nodes import add_node

            node = {"kubernetes.io/hostname": name, **labels}
            add_node(self.sandbox.store, name, node, allocatable)

    def occupy(self, node: str, resources: dict) -> None:
        """A pod outside the scheduler's queues (another team's tool, bound by hand) holding `resources` on `node`,
        running once kwok starts it; the simulator's Volcano counts it on its node as the real scheduler does."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"outside-{node}", "namespace": "default"},
               "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}], "containers": [
                   {"name": "main", "image": "busybox",
                    "resources": {"requests": {k: str(v) for k, v in resources.items()},
                                  "limits": {k: str(v) for k, v in resources.items()}}}]}}
        if self.plane is not None:
            self.plane.apply(pod, f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}")
        else:
            store = self.sandbox.store
            store.create(store.kind("v1", "Pod"), pod)

    def publish_devices(self, nodes: list[str]) -> None:
        """NVIDIA's DRA driver on the nodes, as its chart and kubelet plugin would publish it: the DeviceClasses and
        one ResourceSlice of 8 GPUs per node. The simulator publishes the same for its own nodes (`dra=True`)."""
        if self.plane is not None:
            from sandbox.simulator.dra import device_classes, resource_slice
            from tools import controllers

            controllers.publish_devices(self.plane, device_classes() + [
                resource_slice(node, index, gpus=DRA_FLAVOR["gpus_per_node"]) for index, node in enumerate(nodes)])

    def discover_hypernodes(self, levels: list) -> None:
        """Volcano's label discoverer configured for `levels`, as the admin console tells an operator to
        (`tenants.topology.volcano_discovery_config`): the controller manager's ConfigMap, which it watches."""
        from tenants.topology import volcano_discovery_config

        namespace, name = "volcano-system", "volcano-controller-configmap"
        config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                  "data": {"volcano-controller.conf": volcano_discovery_config(levels)}}
        if self.plane is not None:
            self.plane.apply(config, f"/api/v1/namespaces/{namespace}/configmaps/{name}")
            return
        store = self.sandbox.store
        store.create(store.kind("v1", "Namespace"), {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": namespace}})
        store.create(store.kind("v1", "ConfigMap"), config)

    def stop(self) -> None:
        kube.forget_clients()
        if self.plane is not None:
            self.plane.stop()
        else:
            self.sandbox.stop()


def _target(request, scheduler, crds_dir, settings, **options):
    target = Target(request.param, scheduler, crds_dir, settings, **options)
    request.addfinalizer(target.stop)
    return target


@pytest.fixture(params=TARGETS)
def kueue_target(request, crds_dir, settings):
    return _target(request, "kueue", crds_dir, settings)


@pytest.fixture(params=TARGETS)
def volcano_target(request, crds_dir, settings):
    return _target(request, "volcano", crds_dir, settings)


@pytest.fixture(params=TARGETS)
def kueue_target_pods_ready_timeout(request, crds_dir, settings):
    """Kueue with a 15-second waitForPodsReady timeout."""
    return _target(request, "kueue", crds_dir, settings, pods_ready_timeout=15)


@pytest.fixture(params=TARGETS)
def kueue_target_dra(request, crds_dir, settings):
    """Kueue with its Configuration mapping the DRA flavor's class, for a DRA driver's devices."""
    return _target(request, "kueue", crds_dir, settings, dra=True)


@pytest.fixture(params=TARGETS)
def volcano_target_dra(request, crds_dir, settings):
    """Volcano, for a DRA driver's devices."""
    return _target(request, "volcano", crds_dir, settings, dra=True)


@pytest.fixture(params=TARGETS)
def volcano_target_reclaim(request, crds_dir, settings):
    """Volcano with the portal's scheduler configuration: the reclaim action and the capacity plugin."""
    return _target(request, "volcano", crds_dir, settings, volcano_setup=True)


@pytest.fixture(params=[(scheduler, kind) for scheduler in ("kueue", "volcano") for kind in TARGETS],
                ids=lambda param: "-".join(param))
def ray_target(request, crds_dir, settings):
    """Kueue or Volcano with the KubeRay operator (`--batch-scheduler=volcano` beside Volcano), or the simulator."""
    scheduler, kind = request.param
    target = Target(kind, scheduler, crds_dir, settings, ray=True)
    request.addfinalizer(target.stop)
    return target


@pytest.fixture(scope="session")
def observations():
    """Scenario -> target -> what `scenarios.observe` saw; merged into the file at the end of the session, so a
    partial run keeps what earlier runs recorded for the other scenarios."""
    seen: dict = {}
    yield seen
    if seen:
        OBSERVATIONS.parent.mkdir(parents=True, exist_ok=True)
        kept = json.loads(OBSERVATIONS.read_text()) if OBSERVATIONS.exists() else {}
        for scenario, by_target in seen.items():
            kept.setdefault(scenario, {}).update(by_target)
        OBSERVATIONS.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")


def flavor_nodes(target: Target, flavor, count: int | None = None, *, cpu: int = 96, memory_gib: int = 1024,
                 extra_labels=None) -> list[str]:
    """The flavor's GPUs as fake nodes (`count` of them, by default capacity / gpus_per_node) with its labels and
    taints."""
    names = []
    # A DRA flavor's GPUs are devices in ResourceSlices (`Target.publish_devices`), not a node resource.
    gpus = {} if flavor.device_class else {flavor.resource_name: flavor.gpus_per_node}
    for index in range(flavor.capacity // flavor.gpus_per_node if count is None else count):
        name = f"{flavor.name}-{index}"
        labels = {**flavor.node_labels, **((extra_labels or {}).get(index, {}))}
        target.add_node(name, labels=labels, taints=list(flavor.node_taints or []), allocatable={
            **gpus, "cpu": cpu, "memory": f"{memory_gib}Gi", "pods": 110})
        names.append(name)
    if flavor.device_class:
        target.publish_devices(names)
    return names


def build_world_on(target: Target, *, guaranteed: int = 8, burst: int = 8, nodes: int | None = None,
                   cpu_cores: int = 256, levels: list | None = None, node_labels: dict | None = None,
                   dra: bool = False) -> dict:
    """tests.jobs.conftest.build_world on the target: the same rows (one h100 flavor of 64 GPUs, team nlp with a
    member and an approved quota, three tiers), the cluster registered as an operator would, and the flavor's
    nodes (`nodes` of them, by default all eight). `levels`: the cluster's topology levels; `node_labels`: node
    index -> the topology labels of that node. `dra`: the flavor is `DRA_FLAVOR` (16 devices on two nodes)."""
    from tenants.choices import Role
    from tests.factories import (
        ClusterFactory,
        GpuFlavorFactory,
        MembershipFactory,
        PriorityTierFactory,
        TeamFactory,
        TeamNamespaceFactory,
    )

    scheduler = target.scheduler
    cluster = ClusterFactory(scheduler=scheduler, cohort="gpu" if scheduler == "kueue" else "",
                             topology_levels=levels or [], **target.cluster_fields())
    flavor = GpuFlavorFactory(cluster=cluster, **(DRA_FLAVOR if dra else {"name": "h100", "gpus_per_node": 8,
                                                                          "capacity": 64}))
    flavor_nodes(target, flavor, nodes, extra_labels=node_labels)
    tiers = {name: PriorityTierFactory(name=name, value=value, preemption_policy=policy, is_default=default)
             for name, value, policy, default in (("urgent", 100000, "PreemptLowerPriority", False),
                                                  ("standard", 10000, "PreemptLowerPriority", True),
                                                  ("preemptible", 1000, "Never", False))}
    team = TeamFactory(slug="nlp")
    TeamNamespaceFactory(team=team, cluster=cluster)
    member = MembershipFactory(team=team, role=Role.MEMBER, user__email="erin@example.com").user
    approve_quota(team, member, flavor, guaranteed=guaranteed, burst=burst, cpu_cores=cpu_cores)
    return {"cluster": cluster, "flavor": flavor, "team": team, "tiers": tiers, "member": member, "target": target}


def approve_quota(team, member, flavor, *, guaranteed: int, burst: int, cpu_cores: int = 256) -> None:
    """The team asks and the platform team approves, as in the portal; the cluster's reconcile then applies the
    team's queues."""
    from quotas import services as quota_services
    from tests.factories import PlatformAdminFactory

    request = quota_services.quota_request_create(actor=member, team=team, flavor=flavor, guaranteed=guaranteed,
                                                  burst=burst, cpu_cores=cpu_cores, memory_gib=4096,
                                                  justification="the real controllers' scenarios")
    quota_services.quota_request_approve(actor=PlatformAdminFactory(), request=request)
    reconcile_cluster(flavor.cluster)


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
            raise AssertionError(f"not reached within {timeout:g} s: {what or done}; jobs: {states}; "
                                 f"pods: {pod_story(world)}")
        time.sleep(0.5)


def pod_story(world) -> list:
    """Each pod's phase, node and why it is not scheduled or ready, for a failure message."""
    client = kube.client_for_cluster(world["cluster"])
    story = []
    for pod in client.list("v1", "Pod"):
        status = pod.get("status") or {}
        unmet = [f"{c['type']}: {c.get('message') or c.get('reason', '')}" for c in status.get("conditions") or []
                 if c.get("status") != "True"]
        story.append((pod["metadata"]["name"], status.get("phase"), (pod.get("spec") or {}).get("nodeName"), unmet))
    for job in client.list("batch/v1", "Job"):
        story.append((f"job {job['metadata']['name']}", (job.get("spec") or {}).get("suspend"), job.get("status")))
    if world["cluster"].scheduler == "kueue":
        for workload in client.list("kueue.x-k8s.io/v1beta2", "Workload"):
            status = workload.get("status") or {}
            story.append((f"workload {workload['metadata']['name']}", [
                (c["type"], c["status"], c.get("reason"), c.get("message")) for c in status.get("conditions") or []],
                [a.get("resourceUsage") for a in (status.get("admission") or {}).get("podSetAssignments") or []]))
    return story


def wait_for(check, *, timeout: float = 60, what: str = ""):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout:g} s: {what}")
        time.sleep(0.5)


def wait_in_use(team, units: int, *, what: str) -> None:
    """Until the team's one quota reads `units` in use, as the reconcile sweep reads the cluster's status."""
    def in_use():
        reconcile.reconcile_sweep()
        [held] = quota_selectors.team_held_quotas(team=team)
        return held.in_use == units

    wait_for(in_use, what=what)


def add_team(world, slug: str, *, guaranteed: int, burst: int) -> dict:
    """A second team on the same cluster and flavor (the same cohort under Kueue), with a member; reconciled."""
    from tenants.choices import Role
    from tests.factories import MembershipFactory, TeamFactory, TeamNamespaceFactory

    team = TeamFactory(slug=slug)
    TeamNamespaceFactory(team=team, cluster=world["cluster"])
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    approve_quota(team, member, world["flavor"], guaranteed=guaranteed, burst=burst)
    return {**world, "team": team, "member": member}
