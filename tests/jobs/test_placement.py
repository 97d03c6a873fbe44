"""A job's spot and topology options: what they become per backend (validated strictly against the upstream CRDs),
what the service refuses, and, against a simulating Kueue sandbox with nodes, where the job lands and why."""

import pytest
from django.core.exceptions import ValidationError

from backends import kueue as kueue_backend
from backends import volcano
from jobs import nodes, outcome, placement, selectors, services
from jobs import sync as job_sync
from jobs.choices import JobState
from jobs.manifests import job_manifests
from jobs.models import Job
from quotas import services as quota_services
from tenants.models import GpuFlavor
from tests.factories import PlatformAdminFactory
from tests.jobs.conftest import build_world, reconcile_cluster, step
from tests.jobs.test_manifests import spec

LEVELS = [{"name": "block", "node_label": "example.com/block"}, {"name": "rack", "node_label": "example.com/rack"},
          {"name": "host", "node_label": "kubernetes.io/hostname"}]
SPOT_TAINT = {"key": "example.com/spot", "value": "true", "effect": "NoSchedule"}


def test_kueue_pod_sets_carry_the_topology_request_and_volcano_jobs_their_network_topology(crds_dir):
    from sandbox.validation import Validator

    validator = Validator(crd_dirs=[crds_dir])
    kueue = spec(pod_annotations={kueue_backend.REQUIRED_ANNOTATION: "example.com/rack"},
                 tolerations=[{"key": "example.com/spot", "operator": "Equal", "value": "true",
                               "effect": "NoSchedule"}])
    for obj in job_manifests(kueue) + job_manifests(spec(kind="ray", pod_annotations=kueue.pod_annotations)):
        assert validator.validate(obj, strict=True) == [], obj["kind"]
    job = job_manifests(kueue)[1]
    assert job["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "example.com/rack"}
    (vcjob,) = job_manifests(spec(scheduler="volcano", network_topology={"mode": "soft", "highestTierAllowed": 1},
                                  preferred_node_labels={"example.com/pool": "reserved"}))
    assert validator.validate(vcjob, strict=True) == []
    assert vcjob["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 1}
    affinity = vcjob["spec"]["tasks"][0]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"] == {
        "matchExpressions": [{"key": "example.com/pool", "operator": "In", "values": ["reserved"]}]}


def test_volcano_tiers_count_from_the_narrowest_group_of_nodes():
    assert [volcano.volcano_tier(LEVELS, name) for name in ("block", "rack", "host", "zone")] == [2, 1, 0, 0]


def test_status_and_outcome_say_where_and_why():
    workload = {"status": {"admission": {"podSetAssignments": [{"flavors": {"nvidia.com/gpu": "h100-spot"},
                "topologyAssignment": {"levels": ["example.com/block", "example.com/rack"], "slices": [
                    {"domainCount": 1, "podCounts": {"universal": 2},
                     "valuesPerLevel": [{"universal": "b1"}, {"universal": "r1"}]}]}}]}}}
    assert kueue_backend.kueue_placement(workload) == {"flavors": ["h100-spot"],
                                         "domains": [{"example.com/block": "b1", "example.com/rack": "r1"}]}
    said = outcome.explain(JobState.PREEMPTED, "Workload was evicted as there was no replacement for unhealthy "
                                               "node(s): s1,s2")
    assert said.startswith("Evicted: the nodes it ran on (s1,s2) went away")


def test_kueues_hostname_level_is_read_and_the_rack_taken_from_the_nodes(placement_world):
    """Kueue v0.19 writes a topology whose lowest level is the hostname at that level alone, folding nodes with a
    common prefix into `individual` values (apis/kueue/v1beta2/workload_types.go); the job's rack is then its nodes'
    rack label."""
    workload = {"status": {"admission": {"podSetAssignments": [{"flavors": {"cpu": "h100", "nvidia.com/gpu": "h100"},
                "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [
                    {"domainCount": 2, "podCounts": {"individual": [1, 1]},
                     "valuesPerLevel": [{"individual": {"prefix": "n", "roots": ["1", "2"]}}]}]}}]}}}
    placed = kueue_backend.kueue_placement(workload)
    assert placed == {"flavors": ["h100"],
                      "domains": [{"kubernetes.io/hostname": "n1"}, {"kubernetes.io/hostname": "n2"}]}
    job = Job(cluster=placement_world["cluster"], topology_level="rack")
    assert nodes.lacks_level(job, placed)
    assert nodes.with_levels(job, placed)["domains"] == [
        {"example.com/block": "b1", "example.com/rack": "r1", "kubernetes.io/hostname": name} for name in ("n1", "n2")]
    assert not nodes.lacks_level(job, nodes.with_levels(job, placed))


def placement_setup(sb):
    """gpu-east with block/rack/host levels, reserved h100 nodes in racks r1 (2 nodes) and r2 (1), and a spot
    flavor on nodes in rack s1."""
    world = build_world(sb.url, "kueue", guaranteed=24, burst=0)
    cluster, admin = world["cluster"], PlatformAdminFactory()
    cluster.topology_levels = LEVELS
    cluster.save()
    flavor = world["flavor"]
    flavor.node_labels = {"example.com/pool": "reserved"}
    flavor.save()
    spot = GpuFlavor.objects.create(cluster=cluster, name="h100-spot", capacity=16, spot=True,
                                    node_labels={"example.com/pool": "spot"}, node_taints=[SPOT_TAINT])
    quota_services.quota_set(actor=admin, team=world["team"], flavor=spot, guaranteed=16, burst=0, cpu_cores=128,
                             memory_gib=1024)  # under Kueue a flavor's jobs take their CPU from its own quota
    for name, rack, pool in (("n1", "r1", "reserved"), ("n2", "r1", "reserved"), ("n3", "r2", "reserved"),
                             ("s1", "s1", "spot"), ("s2", "s1", "spot")):
        sb.add_node(name, gpus=8, labels={"example.com/block": "b1", "example.com/rack": rack,
                                          "kubernetes.io/hostname": name, "example.com/pool": pool})
    reconcile_cluster(cluster)
    world["spot"], world["sb"] = spot, sb
    return world


@pytest.fixture
def placement_world(simulating_sandbox, db):
    return placement_setup(simulating_sandbox)


def submit(world, run_on_commit, name, workers, **options):
    with run_on_commit():
        return services.job_submit(actor=world["member"], team=world["team"], flavor=world["flavor"], kind="batch",
                                   name=name, image="ghcr.io/acme/train:1.2", command=["python", "train.py"],
                                   workers=workers, gpus_per_worker=8, cpu_per_worker=4, memory_gib_per_worker=32,
                                   **options)


def test_the_service_refuses_what_cannot_be_placed(placement_world, run_on_commit):
    with pytest.raises(ValidationError, match="no topology level 'zone'"):
        submit(placement_world, run_on_commit, "zoned", 1, topology_level="zone")
    with pytest.raises(ValidationError, match="spot capacity: allow spot"):
        with run_on_commit():
            services.job_submit(actor=placement_world["member"], team=placement_world["team"],
                                flavor=placement_world["spot"], kind="batch", name="on-spot", image="x/y:1",
                                command=["true"], gpus_per_worker=8)


def test_a_job_with_no_topology_request_runs_on_a_topology_flavor_beside_a_shared_one(placement_world, run_on_commit):
    """A team that also holds an MPS share (a flavor with no topology) has a queue that is not all topology
    flavors, so Kueue would give a pod set with no topology request no flavor that has one ("supports only
    TopologyAwareScheduling"). The portal asks for unconstrained topology-aware scheduling instead, and the job
    runs on the reserved flavor; the MPS flavor's jobs ask for nothing."""
    world, sb = placement_world, placement_world["sb"]
    mps = GpuFlavor.objects.create(cluster=world["cluster"], name="h100-mps", capacity=32, sharing="mps", replicas=4,
                                   resource_name="nvidia.com/gpu.shared",
                                   node_labels={"example.com/pool": "reserved"})
    quota_services.quota_set(actor=PlatformAdminFactory(), team=world["team"], flavor=mps, guaranteed=8, burst=0,
                             cpu_cores=16, memory_gib=64)
    reconcile_cluster(world["cluster"])
    free = submit(world, run_on_commit, "anywhere", 1)
    pod_sets = selectors.job_spec(free).pod_annotations
    assert pod_sets == {kueue_backend.UNCONSTRAINED_ANNOTATION: "true"}
    assert placement.placement_fields(cluster=world["cluster"], flavor=mps, level="", mode="") == {
        "pod_annotations": {}, "network_topology": {}}
    step(sb, 0)
    step(sb, 5)
    job_sync.job_status_sync(cluster=world["cluster"])
    free.refresh_from_db()
    assert free.state == JobState.RUNNING, free.state_message
    assert free.placement["flavors"] == ["h100"]


def test_a_rack_bound_job_that_may_use_spot_lands_in_one_rack_of_spot_when_reserved_is_full(
        placement_world, run_on_commit):
    """Reserved holds three 8-GPU nodes; a 3-worker job fills them. The next, two workers kept within one rack and
    allowed on spot, falls back to the spot flavor (the ClusterQueue lists it after reserved) inside rack s1; one
    that may not use spot waits, and says it is placement, not quota, when it asks for a rack none has room in."""
    world, sb = placement_world, placement_world["sb"]
    submit(world, run_on_commit, "fills-reserved", 3)
    step(sb, 0)
    pair = submit(world, run_on_commit, "pair", 2, spot_allowed=True, topology_level="rack")
    spec_ = selectors.job_spec(Job.objects.get(pk=pair.pk))
    assert spec_.node_labels == {} and spec_.tolerations[-1]["key"] == "example.com/spot"
    step(sb, 1)
    job_sync.job_status_sync(cluster=world["cluster"])
    pair = Job.objects.select_related("cluster", "flavor").get(pk=pair.pk)
    assert pair.state == JobState.ADMITTED, pair.state_message
    assert pair.placement["flavors"] == ["h100-spot"]
    assert {d["example.com/rack"] for d in pair.placement["domains"]} == {"s1"}
    assert placement.placement_sentence(pair, selectors.spot_flavor_names(cluster=pair.cluster)) == (
        "Placed on flavor h100-spot; spot capacity, because the reserved flavor h100 was full; it can be evicted; "
        "all workers in rack s1 (as required).")
    big = submit(world, run_on_commit, "wide", 3, spot_allowed=True, topology_level="rack")
    step(sb, 2)
    job_sync.job_status_sync(cluster=world["cluster"])
    big = Job.objects.select_related("team", "flavor", "cluster").get(pk=big.pk)
    assert big.state == JobState.QUEUED
    assert selectors.why_waiting(job=big).startswith(
        "Placement, not quota, is what blocks: no rack has room for all 3 workers together")


@pytest.mark.django_db
def test_a_rack_bound_volcano_job_lands_in_a_discovered_rack_and_the_next_says_placement_blocks(
        simulating_sandbox, run_on_commit):
    """A Volcano cluster whose HyperNodes its label discoverer builds from the configuration the console shows
    (tenants.topology.volcano_discovery_config): racks r1 (2 nodes) and r2 (1 node), r3 (1 node). A 2-worker job
    bound to a rack goes into r1 (hard network topology, tier 1); the next cannot fit in any rack though the queue
    has room, and says so."""
    from sandbox.simulator.volcano_discovery import CONFIG_KEY, CONFIG_NAME, CONFIG_NAMESPACE
    from tenants.topology import volcano_discovery_config

    sb = simulating_sandbox
    world = build_world(sb.url, "volcano", guaranteed=32, burst=0)
    cluster = world["cluster"]
    cluster.topology_levels = LEVELS
    cluster.save()
    for name, block, rack in (("n1", "b1", "r1"), ("n2", "b1", "r1"), ("n3", "b1", "r2"), ("n4", "b2", "r3")):
        sb.add_node(name, gpus=8, labels={"example.com/block": block, "example.com/rack": rack,
                                          "kubernetes.io/hostname": name, **world["flavor"].node_labels})
    store = sb.store
    store.create(store.kind("v1", "Namespace"), {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": CONFIG_NAMESPACE}})
    store.create(store.kind("v1", "ConfigMap"), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIG_NAME, "namespace": CONFIG_NAMESPACE},
        "data": {CONFIG_KEY: volcano_discovery_config(LEVELS)}})
    step(sb, 0)
    first = submit(world, run_on_commit, "ring", 2, topology_level="rack")
    step(sb, 1)
    job_sync.job_status_sync(cluster=cluster)
    first = Job.objects.select_related("cluster", "flavor").get(pk=first.pk)
    assert first.state in (JobState.ADMITTED, JobState.RUNNING)
    assert first.placement["domains"] == [{"example.com/rack": "r1"}]
    assert placement.placement_sentence(first, set()) == "Placed; all workers in rack r1 (as required)."
    second = submit(world, run_on_commit, "ring-2", 2, topology_level="rack")
    step(sb, 2)
    job_sync.job_status_sync(cluster=cluster)
    second = Job.objects.select_related("team", "flavor", "cluster").get(pk=second.pk)
    assert second.state == JobState.QUEUED
    assert selectors.why_waiting(job=second).startswith(
        "Placement, not quota, is what blocks: Volcano let the job into its queue (32 guaranteed + 0 burst, 16 in "
        "use), but its nodes have no room for all 2 workers together within one rack (hard network topology)")


@pytest.mark.django_db
def test_volcano_placement_is_read_from_the_pods_nodes_through_hand_made_hypernodes(simulating_sandbox, run_on_commit,
                                                                                    django_assert_max_num_queries):
    """Volcano v1.15.1 records no HyperNode on the PodGroup; the portal finds the one holding the gang's nodes.
    Hand-made HyperNodes: racks choosing their nodes by label (so the portal reads the Nodes' labels), and a
    tier-2 block of the three. A job allowed a block goes into one rack of it (the narrowest tier first); a
    3-worker job that prefers a rack, where each rack has 2 nodes, spreads over two racks of the block."""
    sb = simulating_sandbox
    world = build_world(sb.url, "volcano", guaranteed=40, burst=0)
    cluster = world["cluster"]
    cluster.topology_levels = LEVELS
    cluster.save()
    racks = ("r1", "r2", "r3")
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2"), ("n4", "r2"), ("n5", "r3"), ("n6", "r3")):
        sb.add_node(name, gpus=8, labels={"example.com/block": "b1", "example.com/rack": rack,
                                          "kubernetes.io/hostname": name, **world["flavor"].node_labels})
    store, kind = sb.store, sb.store.kind("topology.volcano.sh/v1alpha1", "HyperNode")
    for rack in racks:
        store.create(kind, {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                            "metadata": {"name": f"rack-{rack}", "labels": {"example.com/rack": rack}},
                            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {
                                "labelMatch": {"matchLabels": {"example.com/rack": rack}}}}]}})
    store.create(kind, {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                        "metadata": {"name": "block-b1", "labels": {"example.com/block": "b1"}},
                        "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"exactMatch": {
                            "name": f"rack-{rack}"}}} for rack in racks]}})
    narrow = submit(world, run_on_commit, "in-a-block", 2, topology_level="block")
    step(sb, 0)
    job_sync.job_status_sync(cluster=cluster)
    narrow = Job.objects.select_related("cluster", "flavor").get(pk=narrow.pk)
    assert narrow.placement == {"hypernode": "rack-r1", "domains": [{"example.com/rack": "r1"}]}
    assert placement.placement_sentence(narrow, set()) == (
        "Placed; all workers in rack r1 (within one block, as required).")
    wide = submit(world, run_on_commit, "prefers-a-rack", 3, topology_level="rack", topology_mode="preferred")
    step(sb, 1)
    job_sync.job_status_sync(cluster=cluster)
    wide = Job.objects.select_related("cluster", "flavor").get(pk=wide.pk)
    assert wide.state in (JobState.ADMITTED, JobState.RUNNING)
    assert wide.placement == {"hypernode": "block-b1", "domains": [{"example.com/block": "b1"}]}
    assert placement.placement_sentence(wide, set()) == (
        "Placed; workers spread over several racks, all in block b1 (no single rack had room).")
    with django_assert_max_num_queries(1):  # placed and nothing new: the rows' read, whatever the number of jobs
        assert job_sync.job_status_sync(cluster=cluster)["changed"] == 0


def test_the_placement_sentence_for_every_shape_of_placement():
    cluster = type("Cluster", (), {"topology_levels": LEVELS})()
    flavor = type("Flavor", (), {"name": "h100"})()

    def said(placed, level="rack", mode="required"):
        job = type("Job", (), {"placement": placed, "topology_level": level, "topology_mode": mode,
                               "cluster": cluster, "flavor": flavor})()
        return placement.placement_sentence(job, {"h100-spot"})

    assert said({}) == ""
    assert said({"spread": True}, mode="preferred") == (
        "Placed; workers spread over several racks (no single one had room).")
    assert said({"hypernode": "hand-made"}) == "Placed; all workers in HyperNode hand-made."
    assert said({"unmapped": True}) == (
        "Placed; its nodes are in no HyperNode, so Volcano had no network topology to keep them to.")
    assert said({"flavors": ["h100"], "domains": [{"example.com/rack": "r1"}, {"example.com/rack": "r2"}]},
                mode="preferred") == "Placed on flavor h100; workers spread over racks r1, r2 (no single one had room)."
    assert said({"flavors": ["h100-spot"]}, level="") == (
        "Placed on flavor h100-spot; spot capacity, because the reserved flavor h100 was full; it can be evicted.")


@pytest.mark.django_db
def test_new_levels_while_jobs_run_remake_the_flavors_and_the_jobs_go_on(placement_world, run_on_commit):
    """Kueue keeps a topology-placed flavor's topologyName as made: new levels take the flavors out of the team's
    ClusterQueue, Kueue lets them go, and they come back naming the new Topology (backends.kueue). The job
    admitted before runs on; a rack-bound job submitted after is placed by the new levels."""
    from composition import reconcile
    from portal import kube
    from tenants import services as tenant_services

    world, sb = placement_world, placement_world["sb"]
    running = submit(world, run_on_commit, "before", 2, topology_level="rack")
    step(sb, 0)
    step(sb, 6)
    tenant_services.cluster_update(actor=PlatformAdminFactory(), cluster=world["cluster"],
                                   topology_levels=LEVELS[1:])  # rack, host: the block level goes
    for clock in (7, 8, 9, 10):
        if reconcile.reconcile_sweep()["writes"] == 0:
            break
        step(sb, clock)
    client = kube.client_for_cluster(world["cluster"])
    topologies = [t["metadata"]["name"] for t in client.list("kueue.x-k8s.io/v1beta2", "Topology")]
    flavor = client.get("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "h100")
    assert topologies == [flavor["spec"]["topologyName"]]
    job_sync.job_status_sync(cluster=world["cluster"])
    assert Job.objects.get(pk=running.pk).state == JobState.RUNNING
    after = submit(world, run_on_commit, "after", 1, topology_level="rack")
    step(sb, 11)
    world["cluster"].refresh_from_db()  # its new levels name the nodes' labels the placement is read with
    job_sync.job_status_sync(cluster=world["cluster"])
    after = Job.objects.select_related("cluster", "flavor").get(pk=after.pk)
    assert after.state == JobState.ADMITTED
    assert after.placement["domains"] == [{"example.com/rack": "r2", "kubernetes.io/hostname": "n3"}]
