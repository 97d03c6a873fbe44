"""Which flavor a GPU belongs to when several flavors share one resource name and GPU model (a spot pool beside a
reserved one): the node it is on, matched against each flavor's node labels.

Node labels are read from the cluster's API (one list of v1 Nodes per collection), not from kube-state-metrics'
`kube_node_labels`: since kube-state-metrics v2 that series carries only the labels allow-listed with
`--metric-labels-allowlist=nodes=[...]`, which a stock kube-prometheus-stack does not set, while the portal already
holds credentials that can list Nodes on every cluster it manages.
"""

from __future__ import annotations

from collections.abc import Iterable

from portal import kube

from .metrics import MetricsError


def flavor_on_node(flavors: Iterable, labels: dict[str, str] | None):
    """The flavor whose node labels are all on the node, the most specific one when several are (a spot pool's
    labels add to the reserved pool's); None when no flavor or two equally specific ones match."""
    if labels is None:
        return None
    matching = sorted((f for f in flavors if all(labels.get(k) == v for k, v in (f.node_labels or {}).items())),
                      key=lambda f: -len(f.node_labels or {}))
    if not matching or (len(matching) > 1 and len(matching[0].node_labels or {}) == len(matching[1].node_labels or {})):
        return None
    return matching[0]


def cluster_node_labels(cluster) -> dict[str, dict[str, str]]:
    """node name → its labels, listed once from the cluster's API."""
    try:
        nodes = kube.client_for_cluster(cluster).list("v1", "Node")
    except kube.KubeError as exc:
        raise MetricsError(f"listing the nodes of {cluster.name} failed: {exc}") from exc
    return {node["metadata"]["name"]: dict(node["metadata"].get("labels") or {}) for node in nodes}
