"""Kueue's resource-in-use finalizer, as Kueue holds it on the objects other objects depend on.

- ClusterQueue: the mutating webhook adds it on create (pkg/webhooks/clusterqueue_webhook.go Default); once the
  queue is being deleted, the controller removes it only when no workload still reserves quota in it
  (pkg/controller/core/clusterqueue_controller.go Reconcile, cache ClusterQueueEmpty).
- ResourceFlavor: the webhook adds it on create (pkg/webhooks/resourceflavor_webhook.go Default); the controller
  removes it from a flavor being deleted only when no ClusterQueue lists the flavor any more
  (pkg/controller/core/resourceflavor_controller.go Reconcile, ClusterQueuesUsingFlavor).
- Topology: the controller adds it (no webhook), and removes it from a Topology being deleted only when no
  ResourceFlavor names it in topologyName (pkg/controller/tas/topology_controller.go Reconcile).

A deleted object in use therefore stays, Terminating, until what uses it lets go; then it goes at once.
"""

from __future__ import annotations

GROUP = "kueue.x-k8s.io"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
CLUSTER_QUEUE, RESOURCE_FLAVOR, TOPOLOGY, WORKLOAD = ((GROUP, k) for k in (
    "ClusterQueue", "ResourceFlavor", "Topology", "Workload"))


def add_finalizer(op: str, obj: dict) -> None:
    """The webhooks' Default: on create only (no finalizer is added to an object being deleted)."""
    if op != "CREATE":
        return
    finalizers = obj["metadata"].setdefault("finalizers", [])
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)


def _items(store, key) -> list[dict]:
    """The stored objects of a kind, read in place (this runs after every change of four kinds)."""
    return [obj for pool in list(store._objects.get(key, {}).values()) for obj in list(pool.values())]


def _terminating(store, key) -> list[dict]:
    return [obj for obj in _items(store, key)
            if obj["metadata"].get("deletionTimestamp") and FINALIZER in (obj["metadata"].get("finalizers") or ())]


def _reserving(workload: dict, queue: str) -> bool:
    status = workload.get("status") or {}
    if ((status.get("admission") or {}).get("clusterQueue")) != queue:
        return False
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    return conditions.get("QuotaReserved") == "True" and conditions.get("Finished") != "True"


def _in_use(store, key, name: str) -> bool:
    if key == CLUSTER_QUEUE:
        return any(_reserving(w, name) for w in _items(store, WORKLOAD))
    if key == RESOURCE_FLAVOR:
        return any(flavor.get("name") == name for cq in _items(store, CLUSTER_QUEUE)
                   for group in (cq.get("spec") or {}).get("resourceGroups") or ()
                   for flavor in group.get("flavors") or ())
    return any((rf.get("spec") or {}).get("topologyName") == name for rf in _items(store, RESOURCE_FLAVOR))


def release(event: str, obj: dict, store, rt) -> None:
    """After any change to a ClusterQueue, ResourceFlavor, Topology or Workload: a new Topology gets the finalizer,
    and each Terminating object nothing uses any more loses it, queues before flavors before Topologies (a queue
    gone may free a flavor, a flavor gone its Topology)."""
    meta = obj["metadata"]
    if rt.key == TOPOLOGY and event != "DELETED" and not meta.get("deletionTimestamp") \
            and FINALIZER not in (meta.get("finalizers") or ()):
        store.update(rt, {**obj, "metadata": {**meta, "finalizers": [*(meta.get("finalizers") or ()), FINALIZER]}},
                     None, meta["name"])
        return
    for key in (CLUSTER_QUEUE, RESOURCE_FLAVOR, TOPOLOGY):
        kind = store.registry.by_key.get(key)
        for name in [held["metadata"]["name"] for held in _terminating(store, key)]:
            held = store._stored(kind, None, name)  # a release just made (nested, by its event) may have taken it
            if held is None or FINALIZER not in (held["metadata"].get("finalizers") or ()) \
                    or _in_use(store, key, name):
                continue
            rest = [f for f in held["metadata"]["finalizers"] if f != FINALIZER]
            store.update(kind, {**held, "metadata": {**held["metadata"], "finalizers": rest}}, None, name)


MUTATORS = {CLUSTER_QUEUE: add_finalizer, RESOURCE_FLAVOR: add_finalizer}
CONTROLLERS = {key: release for key in (CLUSTER_QUEUE, RESOURCE_FLAVOR, TOPOLOGY, WORKLOAD)}
