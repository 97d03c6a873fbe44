"""Where a scheduler records a job's place by node only, the wider topology levels are read from its nodes' labels:
Kueue's TAS writes just the hostname level when the cluster's lowest level is the hostname (`backends.kueue`,
`kueue_placement`), so a rack-bound job's rack is the rack label of the nodes it was given."""

from __future__ import annotations

import time

from portal import kube
from tenants.topology import level_label

NODES_TTL = 60.0  # seconds a cluster's Nodes are reused: they change rarely (again after 5 s when one is missing)
_nodes: dict[int, tuple[float, list[dict]]] = {}


def lacks_level(job, placement: dict) -> bool:
    """The placement names nodes but not the job's level."""
    label = level_label(job.cluster.topology_levels, job.topology_level)
    domains = placement.get("domains") or []
    return bool(label and domains and all(label not in d for d in domains)
                and any(_node_key(job.cluster.topology_levels) in d for d in domains))


def with_levels(job, placement: dict) -> dict:
    """The placement with each node's wider levels from its labels (a node not found keeps what it had)."""
    key = _node_key(job.cluster.topology_levels)
    labels = node_labels(job.cluster, {d[key] for d in placement["domains"] if key in d})
    wider = [level["node_label"] for level in job.cluster.topology_levels]
    domains = []
    for domain in placement["domains"]:
        found = labels.get(domain.get(key, "")) or {}
        filled = {**{label: found[label] for label in wider if label in found}, **domain}
        if filled not in domains:
            domains.append(filled)
    return {**placement, "domains": domains}


def cluster_nodes(cluster, *, missing: bool = False) -> list[dict]:
    """The cluster's Nodes as last listed, listed again once a minute at most (after 5 s when the caller is missing a
    node). Raises `kube.KubeError` when they cannot be listed."""
    read_at, nodes = _nodes.get(cluster.pk, (-NODES_TTL, []))
    age = time.monotonic() - read_at
    if age >= NODES_TTL or (missing and age >= 5):
        nodes = kube.client_for_cluster(cluster).list("v1", "Node")
        _nodes[cluster.pk] = (time.monotonic(), nodes)
    return nodes


def node_labels(cluster, names: set[str]) -> dict[str, dict]:
    """The labels of the cluster's nodes (`cluster_nodes`; listed again sooner when one of `names` is not known)."""
    def labels_of(nodes):
        return {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes}

    labels = labels_of(cluster_nodes(cluster))
    return labels if names <= set(labels) else labels_of(cluster_nodes(cluster, missing=True))


def _node_key(levels) -> str:
    """The label of the narrowest level (the node's own, where the cluster lists the hostname)."""
    return levels[-1]["node_label"] if levels else ""
