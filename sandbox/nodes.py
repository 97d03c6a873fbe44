"""Nodes for a sandbox cluster, as a kubelet registers them: labels on the Node, capacity in its status.

The simulator places Kueue's topology-aware workloads on them (`simulator.kueue_tas`); a node deleted is one its
provider took back (spot)."""

from __future__ import annotations

from .errors import ApiError


def node_manifest(name: str, labels: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}


def node_status(allocatable: dict) -> dict:
    allocatable = {k: str(v) for k, v in allocatable.items()}
    return {"status": {"capacity": dict(allocatable), "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def add_node(store, name: str, labels: dict, allocatable: dict) -> None:
    """Create the node (or refresh it) and report its capacity through the status subresource."""
    rt = store.kind("v1", "Node")
    try:
        store.get(rt, None, name)
    except ApiError:  # not there yet
        store.create(rt, node_manifest(name, labels))
    else:
        store.patch(rt, None, name, {"metadata": {"labels": dict(labels)}}, "merge")
    store.patch(rt, None, name, node_status(allocatable), "merge", subresource="status")
