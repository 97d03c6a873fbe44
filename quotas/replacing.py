"""Kueue ResourceFlavors the cluster must make again: a change Kueue does not let an existing flavor take.

A ResourceFlavor with a topologyName keeps that topologyName, its nodeLabels and its tolerations as made (kueue
v0.19.2 config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml, the CEL rules on oldSelf), so new
topology levels (another Topology name, see `manifests.topology_name`), a flavor no longer placed by topology, or
new labels or tolerations on such a flavor can only be had by deleting the flavor and creating it again. Deleting
is not immediate: the flavor keeps Kueue's resource-in-use finalizer while any ClusterQueue lists it
(pkg/controller/core/resourceflavor_controller.go), and a Topology keeps it while a flavor names it
(pkg/controller/tas/topology_controller.go).

So a flavor to make again is, for a while, out of what the cluster reconcile applies (it is pruned) and out of
every team's ClusterQueue (`desired.team_quota_objects`); once Kueue has let it go, it is applied anew with what it
must now be, and the queues list it again. Workloads admitted on it keep running meanwhile; new ones on it wait.
A flavor found Terminating (deleted by hand, say) is let go and made again the same way.

Pure functions over the desired and live objects.
"""

from __future__ import annotations

from portal.reconcile import is_subset

FIXED_WITH_TOPOLOGY = ("topologyName", "nodeLabels", "tolerations")


def _same(desired, live) -> bool:
    desired, live = desired or None, live or None  # an empty map or list is no field
    if desired is None or live is None:
        return desired is live
    return is_subset(desired, live) and is_subset(live, desired)


def must_remake(desired: dict, live: dict) -> bool:
    """Whether the live ResourceFlavor cannot become the desired one by an update."""
    if live["metadata"].get("deletionTimestamp"):
        return True
    old, new = live.get("spec") or {}, desired.get("spec") or {}
    return "topologyName" in old and not all(_same(new.get(key), old.get(key)) for key in FIXED_WITH_TOPOLOGY)


def flavors_to_remake(desired: list[dict], actual: list[dict]) -> list[str]:
    """Names of the desired ResourceFlavors whose live object must go before they can be what is desired."""
    live = {obj["metadata"]["name"]: obj for obj in actual if obj["kind"] == "ResourceFlavor"}
    return sorted(obj["metadata"]["name"] for obj in desired if obj["kind"] == "ResourceFlavor"
                  and obj["metadata"]["name"] in live and must_remake(obj, live[obj["metadata"]["name"]]))


def without(desired: list[dict], names: list[str]) -> list[dict]:
    """The desired cluster objects less the flavors being made again (so the reconcile prunes them)."""
    return [obj for obj in desired if not (obj["kind"] == "ResourceFlavor" and obj["metadata"]["name"] in names)]
