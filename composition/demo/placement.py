"""The demo's placement data on both sandbox clusters: topology levels (block, rack, host) with nodes labelled for
them, a spot H100 flavor on tainted nodes of its own, fair-sharing weights for the busy teams, and on the Volcano
cluster the controller configuration with which Volcano's label discoverer builds HyperNodes of the same levels
(volcano pkg/controllers/hypernode/discovery/label/label.go: tier 1 groups nodes, tier 2 groups tier-1
HyperNodes).

A real cluster has its nodes already; the sandbox is given them over its own API, as a kubelet registers itself.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from sandbox.nodes import node_manifest, node_status
from tenants import services, topology
from tenants.models import Cluster, GpuFlavor, Team

BLOCK, RACK, HOST = "topology.gpu-portal.io/block", "topology.gpu-portal.io/rack", "kubernetes.io/hostname"
TOPOLOGY = [{"name": "block", "node_label": BLOCK}, {"name": "rack", "node_label": RACK},
            {"name": "host", "node_label": HOST}]
SPOT_TAINT = {"key": "gpu-portal.io/spot", "value": "true", "effect": "NoSchedule"}
H100 = "NVIDIA-H100-80GB-HBM3"
SPOT_FLAVOR = dict(name="h100-spot", resource_name="nvidia.com/gpu", gpu_model="NVIDIA H100 80GB HBM3", capacity=16,
                   gpus_per_node=8, memory_gb=80, spot=True,
                   node_labels={"nvidia.com/gpu.product": H100, "gpu-portal.io/capacity": "spot"},
                   node_taints=[SPOT_TAINT],
                   tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
WEIGHTS = {"nlp": 3, "ml-research": 2}  # busy teams of one department: nlp gets the larger part of what is free


def _nodes(prefix: str, racks: list[tuple[str, str, int]], labels: dict, allocatable: dict) -> list[tuple]:
    nodes = []
    for block, rack, count in racks:
        for index in range(1, count + 1):
            name = f"{prefix}-{rack}-{index}"
            nodes.append((name, {BLOCK: block, RACK: rack, HOST: name, **labels},
                          {"cpu": "128", "memory": "2Ti", "pods": "110", **allocatable}))
    return nodes


def east_nodes() -> list[tuple]:
    """64 reserved H100s in two racks of block b1, 16 spot H100s in block b2, and the MIG nodes."""
    reserved = {"nvidia.com/gpu.product": H100, "gpu-portal.io/capacity": "reserved"}
    return (_nodes("east", [("b1", "r1", 4), ("b1", "r2", 4)], reserved, {"nvidia.com/gpu": 8})
            + _nodes("east", [("b2", "s1", 2)], SPOT_FLAVOR["node_labels"], {"nvidia.com/gpu": 8})
            + _nodes("east-mig1g", [("b1", "r3", 1)], {"nvidia.com/mig.config": "all-1g.10gb"},
                     {"nvidia.com/mig-1g.10gb": 56})
            + _nodes("east-mig3g", [("b1", "r3", 1)], {"nvidia.com/mig.config": "all-3g.40gb"},
                     {"nvidia.com/mig-3g.40gb": 16}))


def west_nodes() -> list[tuple]:
    """gpu-west's nodes, one kind per flavor and as many as the flavor's capacity: three A100 nodes in racks r1 and
    r2 of block b1; L40S (4 a node) in racks r3 and r4 of block b2; the time-sliced L40S replicas in rack r5. The
    DRA H100s come from ResourceSlices, not from a node's allocatable."""
    a100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    l40s = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    shared = {**l40s, "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    return (_nodes("west-a100", [("b1", "r1", 2), ("b1", "r2", 1)], a100, {"nvidia.com/gpu": 8})
            + _nodes("west-l40s", [("b2", "r3", 3), ("b2", "r4", 3)], l40s, {"nvidia.com/gpu": 4})
            + _nodes("west-shared", [("b2", "r5", 2)], shared, {"nvidia.com/gpu.shared": 8}))


def volcano_discovery(levels) -> dict:
    """The Volcano controller's ConfigMap with the label discovery the console shows for these levels (a platform
    admin applies it once; Volcano then builds and keeps the HyperNodes)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": topology.VOLCANO_CONFIG_NAME, "namespace": topology.VOLCANO_CONFIG_NAMESPACE},
            "data": {topology.VOLCANO_CONFIG_KEY: topology.volcano_discovery_config(levels)}}


def _call(url: str, method: str, path: str, body: dict, content_type: str = "application/json") -> None:
    request = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode(),
                                     headers={"Content-Type": content_type, "Authorization": "Bearer sandbox"})
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except urllib.error.HTTPError as exc:
        if exc.code != 409:  # already there: the demo is idempotent
            raise


def register_nodes(url: str, nodes: list[tuple]) -> None:
    for name, labels, allocatable in nodes:
        _call(url, "POST", "/api/v1/nodes", node_manifest(name, labels))
        _call(url, "PATCH", f"/api/v1/nodes/{name}/status", node_status(allocatable),
              "application/merge-patch+json")


def configure_volcano_discovery(url: str, levels) -> None:
    body = volcano_discovery(levels)
    namespace = body["metadata"]["namespace"]
    _call(url, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": namespace}})
    _call(url, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body)


def seed(admin, servers: dict[str, str]) -> None:
    """Levels on both clusters, reserved H100s told apart from spot ones, team weights; then the sandboxes' nodes
    (the spot flavor itself is one of the demo's flavors)."""
    for cluster in Cluster.objects.filter(name__in=servers):
        if not cluster.topology_levels:
            services.cluster_update(actor=admin, cluster=cluster, topology_levels=TOPOLOGY)
    east = Cluster.objects.get(name="gpu-east")
    reserved = GpuFlavor.objects.get(cluster=east, name="h100")
    if "gpu-portal.io/capacity" not in reserved.node_labels:  # so its nodes and the spot ones are told apart
        reserved.node_labels = {**reserved.node_labels, "gpu-portal.io/capacity": "reserved"}
        services.gpu_flavor_save(actor=admin, flavor=reserved)
    for slug, weight in WEIGHTS.items():
        team = Team.objects.get(slug=slug)
        if team.fair_share_weight != weight:
            services.team_set_fair_share_weight(actor=admin, team=team, weight=weight)
    register_nodes(servers["gpu-east"], east_nodes())
    register_nodes(servers["gpu-west"], west_nodes())
    configure_volcano_discovery(servers["gpu-west"], TOPOLOGY)
