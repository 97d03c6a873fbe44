"""Kueue's Topology-Aware Scheduling and flavor taints, for the flavor assigner in `kueue`.

Sources (kubernetes-sigs/kueue):
- A ResourceFlavor with `topologyName` is a TAS flavor: its nodes (those carrying the flavor's nodeLabels) are
  grouped into domains by the Topology's level labels (pkg/cache/scheduler/tas_flavor_snapshot.go).
- A pod set annotated kueue.x-k8s.io/podset-required-topology: <level label> must fit whole in one domain of that
  level, else the flavor does not fit, with "topology "<name>" allows to fit only N out of M pod(s)" or "doesn't
  allow to fit any of M pod(s)", and ". Total nodes: N; excluded: resource "<name>": K" for the nodes where not one
  pod fits (notFitMessage, tasExclusionStats); -preferred-topology tries one domain, then spreads over the
  fewest it can (apis/kueue/v1beta1/topology_types.go). Among the domains that fit, the one with the least room
  is taken (BestFit), so large domains stay free for large gangs.
- A pod set with neither annotation is placed by TAS only in a ClusterQueue whose flavors all name a topology
  (implied TAS, pkg/cache/scheduler/clusterqueue.go isTASOnly), on any nodes of the flavor. Elsewhere a TAS flavor
  refuses it ("supports only TopologyAwareScheduling"), and a flavor without a topology refuses a pod set asking
  for TAS when it covers any resource the pod set requests ("does not support TopologyAwareScheduling"), or lacks
  the requested level (pkg/scheduler/flavorassigner/tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS).
- The assignment is the Workload's podSetAssignments[].topologyAssignment (levels, slices of domains with their
  pod counts; apis/kueue/v1beta2/workload_types.go).
- A workload whose assigned node is gone and cannot be replaced is evicted with reason NodeFailures, "Workload was
  evicted as there was no replacement for unhealthy node(s): <nodes>" (pkg/scheduler/scheduler.go,
  evictWorkloadAfterFailedTASReplacement), and queues again: a spot provider taking its nodes back looks so.
- A flavor's NoSchedule/NoExecute nodeTaints must be tolerated by the pods or by the flavor's own tolerations
  (pkg/scheduler/flavorassigner/flavorassigner.go, checkFlavorForPodSets: "untolerated taint ... in flavor ...").
"""

from __future__ import annotations

from collections import Counter, defaultdict
from decimal import Decimal

from ..quantity import parse_quantity

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
HOSTNAME = "kubernetes.io/hostname"
KUEUE = "kueue.x-k8s.io/v1beta2"
NODE_FAILURES = "NodeFailures"
# The sandbox's pacing, not Kueue's: the evicted workload is tried again this much later, so a status sync every
# few seconds sees the eviction before it is admitted elsewhere.
REQUEUE_AFTER_NODE_FAILURE = 15.0


def lost_nodes_message(nodes: list[str]) -> str:
    return f"Workload was evicted as there was no replacement for unhealthy node(s): {','.join(nodes)}"


def snapshot(objects) -> dict:
    topologies = {t["metadata"]["name"]: [level["nodeLabel"] for level in (t.get("spec") or {}).get("levels") or []]
                  for t in objects.list(KUEUE, "Topology")} if objects.installed(KUEUE, "Topology") else {}
    flavors = {}
    for rf in objects.list(KUEUE, "ResourceFlavor"):
        spec = rf.get("spec") or {}
        flavors[rf["metadata"]["name"]] = {"topology": spec.get("topologyName", ""),
                                           "taints": spec.get("nodeTaints") or [],
                                           "tolerations": spec.get("tolerations") or []}
    nodes = []
    if topologies:
        for node in objects.list("v1", "Node"):
            status = node.get("status") or {}
            allocatable = status.get("allocatable") or status.get("capacity") or {}
            nodes.append((node["metadata"]["name"], node["metadata"].get("labels") or {},
                          {k: parse_quantity(v) for k, v in allocatable.items()}))
    return {"topologies": topologies, "flavors": flavors, "nodes": nodes}


def _taint_text(taint: dict) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def tolerates(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", "")


def untolerated(tas: dict, flavor: str, template: dict) -> str:
    """The reason a flavor's taints keep this pod set off it; '' when they do not."""
    info = tas["flavors"].get(flavor) or {}
    tolerations = list((template.get("spec") or {}).get("tolerations") or []) + list(info.get("tolerations") or [])
    for taint in info.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return f"untolerated taint {_taint_text(taint)} in flavor {flavor}"
    return ""


def tas_only(tas: dict, groups: list) -> bool:
    """Every flavor the ClusterQueue lists names a topology."""
    return all((tas["flavors"].get(flavor) or {}).get("topology") for _, flavors in groups for flavor in flavors)


def mismatch(tas: dict, flavor: str, pod_set, covered: list[str], tas_only_queue: bool) -> str:
    """Why this flavor cannot take the pod set as to TAS; '' when it can."""
    annotations = (pod_set.template.get("metadata") or {}).get("annotations") or {}
    explicit = any(key in annotations for key in (REQUIRED, PREFERRED, UNCONSTRAINED))
    topology = (tas["flavors"].get(flavor) or {}).get("topology")
    if explicit or tas_only_queue:
        if not explicit:  # implied: every flavor of the queue names a topology
            return ""
        if not topology:
            if not any(resource in covered for resource in pod_set.requests):
                return ""
            return f'Flavor "{flavor}" does not support TopologyAwareScheduling'
        levels = tas["topologies"].get(topology)
        if levels is None:
            return f'Flavor "{flavor}" information missing in TAS cache'
        label = annotations.get(REQUIRED) or annotations.get(PREFERRED)
        if label and label not in levels:
            return f'Flavor "{flavor}" does not contain the requested level'
        return ""
    if topology:
        return f'Flavor "{flavor}" supports only TopologyAwareScheduling'
    return ""


def refused(tas: dict, flavor: str, labels: dict, selector: dict, pod_set, covered: list[str],
            tas_only_queue: bool) -> str:
    """checkFlavorForPodSets: why the flavor cannot take the pod set (TAS, then taints, then node affinity on the
    flavor's own label keys: flavorSelector); '' when it can."""
    if any(key in labels and labels[key] != value for key, value in selector.items()):
        affinity = f"flavor {flavor} doesn't match node affinity"
    else:
        affinity = ""
    return (mismatch(tas, flavor, pod_set, covered, tas_only_queue)
            or untolerated(tas, flavor, pod_set.template) or affinity)


def _fits_on(free: dict, requests: dict) -> tuple[int, str]:
    """How many pods fit, and the resource that limits it (ties by name: CountInWithLimitingResource)."""
    counts = sorted((max(0, int(free.get(r, Decimal(0)) // v)), r) for r, v in requests.items() if v > 0)
    return counts[0] if counts else (1 << 30, "")


def _excluded(room: dict) -> str:
    """notFitMessage's exclusion stats: the nodes where not even one pod fits, by limiting resource."""
    full = Counter(limiting for _, fits, limiting in room.values() if fits == 0 and limiting)
    reasons = sorted(f'resource "{resource}": {nodes}' for resource, nodes in full.items())
    return f". Total nodes: {len(room)}; excluded: {', '.join(reasons)}" if reasons else ""


def place(tas: dict, used: dict, flavor: str, node_labels: dict, pod_set) -> tuple[dict | None, str]:
    """({} when the flavor is not a TAS flavor | the assignment), or (None, why it does not fit)."""
    topology = (tas["flavors"].get(flavor) or {}).get("topology")
    if not topology:
        return {}, ""
    levels = tas["topologies"].get(topology)
    if levels is None:
        return None, f"flavor {flavor} refers to a Topology {topology} that doesn't exist"
    annotations = (pod_set.template.get("metadata") or {}).get("annotations") or {}
    mode, label = ("required", annotations[REQUIRED]) if REQUIRED in annotations else (
        ("preferred", annotations[PREFERRED]) if PREFERRED in annotations else ("", ""))
    depth = levels.index(label) + 1 if label in levels else 0
    room = {}
    for name, labels, allocatable in tas["nodes"]:
        if all(labels.get(k) == v for k, v in node_labels.items()) and all(level in labels for level in levels):
            free = {r: allocatable.get(r, Decimal(0)) - used.get(name, {}).get(r, Decimal(0)) for r in allocatable}
            room[name] = (tuple(labels[level] for level in levels), *_fits_on(free, pod_set.requests))
    domains: dict[tuple, list[str]] = defaultdict(list)
    for name, (values, _, _) in room.items():
        domains[values[:depth]].append(name)
    capacity = {d: sum(room[n][1] for n in names) for d, names in domains.items()}
    count = pod_set.count
    fitting = sorted((c, d) for d, c in capacity.items() if c >= count)
    if fitting:
        chosen = domains[fitting[0][1]]
    elif mode == "required" or sum(capacity.values()) < count:
        best = max(capacity.values(), default=0)
        what = f"allows to fit only {best} out of" if best else "doesn't allow to fit any of"
        return None, f'topology "{topology}" {what} {count} pod(s){_excluded(room)}'
    else:  # preferred, or no level asked: the fewest domains, largest first
        chosen = [n for _, d in sorted(((-c, d) for d, c in capacity.items())) for n in domains[d]]
    counts: dict[str, int] = {}
    left = count
    for name in sorted(chosen, key=lambda n: (-room[n][1], n)):
        take = min(left, room[name][1])
        if take:
            counts[name] = take
            left -= take
    return {"levels": levels, "nodes": counts, "values": {n: room[n][0] for n in counts}}, ""


def charge(used: dict, job, sign: int) -> None:
    for pod_set in job.pod_sets:
        for node, pods in ((job.topology.get(pod_set.name) or {}).get("nodes") or {}).items():
            for resource, value in pod_set.requests.items():
                used.setdefault(node, defaultdict(Decimal))[resource] += sign * value * pods


def pod_nodes(job) -> list[str]:
    """The node of each pod the job creates, in pod order, when TAS placed every pod set (Kueue's TopologyUngater
    gives each pod its assigned node's selector, so kube-scheduler binds it there); [] otherwise."""
    nodes = []
    for pod_set in job.pod_sets:
        if not pod_set.creates_pods:
            continue
        placed = (job.topology.get(pod_set.name) or {}).get("nodes") or {}
        if sum(placed.values()) < pod_set.count:
            return []
        nodes += [node for node, pods in sorted(placed.items()) for _ in range(pods)]
    return nodes


def assignment_status(placement: dict) -> dict:
    """podSetAssignments[].topologyAssignment: one slice per node, each level's value given once. Where the lowest
    level is the hostname only that level is written (pkg/cache/scheduler/tas_flavor_snapshot.go, buildAssignment;
    Kueue may also fold nodes sharing a prefix into one slice of `individual` values, which reads the same)."""
    levels = list(placement["levels"])
    first = len(levels) - 1 if levels and levels[-1] == HOSTNAME else 0
    return {"levels": levels[first:], "slices": [
        {"domainCount": 1, "podCounts": {"universal": pods},
         "valuesPerLevel": [{"universal": value} for value in placement["values"][node][first:]]}
        for node, pods in sorted(placement["nodes"].items())]}
