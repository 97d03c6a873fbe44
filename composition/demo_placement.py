"""The demo's placement data on both sandbox clusters: topology levels (block, rack, host) with nodes labelled for
them, a spot H100 flavor on tainted nodes of its own, fair-sharing weights for the busy teams, and on the Volcano
cluster the HyperNodes of the same levels, shaped as Volcano's label discoverer makes them (volcano v1.15.1
pkg/controllers/hypernode/discovery/label/label.go: tier 1 groups nodes, tier 2 groups tier-1 HyperNodes).

A real cluster has its nodes already; the sandbox is given them over its own API, as a kubelet registers itself.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from sandbox.nodes import node_manifest, node_status
from tenants import services
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


# gpu-west's racks: (block, rack). Its HyperNodes select nodes by their rack label, as a HyperNode may (labelMatch),
# so they hold whatever nodes carry it; the Volcano sandbox counts capacity from Nodes once it has any, and the demo
# keeps gpu-west's capacity what its queues are promised, so no nodes are registered there.
WEST_RACKS = [("b1", "r1"), ("b1", "r2"), ("b2", "r3")]


def hypernodes(racks: list[tuple[str, str]]) -> list[dict]:
    """Tier 1: one HyperNode per rack, its members the nodes labelled with it; tier 2: one per block holding its
    racks."""
    def hypernode(name, tier, tier_name, members):
        return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
                "spec": {"tier": tier, "tierName": tier_name, "members": members}}

    blocks: dict[str, list[str]] = {}
    for block, rack in racks:
        blocks.setdefault(block, []).append(f"rack-{rack}")
    return ([hypernode(f"rack-{rack}", 1, "rack", [
                {"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK: rack}}}}])
             for _, rack in racks]
            + [hypernode(f"block-{block}", 2, "block", [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": member}}} for member in members])
               for block, members in sorted(blocks.items())])


def _call(url: str, method: str, path: str, body: dict, content_type: str = "application/json") -> None:
    request = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode(),
                                     headers={"Content-Type": content_type, "Authorization": "Bearer sandbox"})
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except urllib.error.HTTPError as exc:
        if exc.code != 409:  # already there: the demo is idempotent
            raise


def register_nodes(url: str, nodes: list[tuple], extra: list[dict] = ()) -> None:
    for name, labels, allocatable in nodes:
        _call(url, "POST", "/api/v1/nodes", node_manifest(name, labels))
        _call(url, "PATCH", f"/api/v1/nodes/{name}/status", node_status(allocatable),
              "application/merge-patch+json")
    for obj in extra:
        _call(url, "POST", "/apis/topology.volcano.sh/v1alpha1/hypernodes", obj)


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
    register_nodes(servers["gpu-west"], [], hypernodes(WEST_RACKS))
