"""Where a job may run: spot capacity beside the reserved flavor it asked for, and the topology domain its workers
keep to. Pure functions over flavor and cluster rows already loaded; nothing here queries or writes.

Spot on Kueue: a spot flavor's nodes carry its taints, and Kueue only assigns a flavor whose NoSchedule/NoExecute
taints the pod tolerates (kueue pkg/scheduler/flavorassigner/flavorassigner.go, checkFlavorForPodSets), so
a job that may run on spot tolerates them and selects only the node labels its flavor shares with the spot ones;
the ClusterQueue lists spot after reserved, so Kueue falls back to spot when reserved is full. Volcano has no
flavors and no fallback of its own: the job tolerates the spot taints and prefers (node affinity, which Volcano's
nodeorder plugin scores) the reserved flavor's nodes.

Topology: what a job carries to keep to a level, and which levels and flavors can be kept to, are its scheduler's
(`Backend.placement_fields`, `Backend.topology_problem`).
"""

from backends import backend_for
from tenants.topology import level_label

from .choices import Placement

SPOT_WARNING = ("Spot capacity can be reclaimed by its provider at any time: the job is then evicted and queues "
                "again from its start (save checkpoints).")


def spot_siblings(flavor, cluster_flavors, strategy: str) -> list:
    """The cluster's spot flavors of the same resource, the flavor itself included when it is spot."""
    resource = flavor.scheduled_resource(strategy)
    return [f for f in cluster_flavors if f.spot and f.scheduled_resource(strategy) == resource]


def shared_labels(flavor, siblings, strategy: str) -> dict:
    labels = flavor.scheduled_node_labels(strategy)
    for sibling in siblings:
        theirs = sibling.scheduled_node_labels(strategy)
        labels = {k: v for k, v in labels.items() if theirs.get(k) == v}
    return labels


def tolerations_for(taints) -> list[dict]:
    seen, result = set(), []
    for taint in taints:
        toleration = {"key": taint["key"], "operator": "Equal" if taint.get("value") else "Exists",
                      "effect": taint["effect"]}
        if taint.get("value"):
            toleration["value"] = taint["value"]
        key = tuple(sorted(toleration.items()))
        if key not in seen:
            seen.add(key)
            result.append(toleration)
    return result


def topology_problem(*, cluster, flavor, kind: str, level: str, mode: str) -> str:
    """Why the topology option cannot be honoured for this job; '' when it can (or is not asked for)."""
    if not level:
        return ""  # anywhere: a placement mode alone means nothing
    if mode not in Placement.values:
        return "Choose required or preferred."
    if not level_label(cluster.topology_levels, level):
        names = ", ".join(lv["name"] for lv in cluster.topology_levels) or "none"
        return f"Cluster {cluster.name} has no topology level {level!r} (its levels: {names})."
    return backend_for(cluster).topology_problem(cluster=cluster, flavor=flavor, kind=kind, level=level)


def placement_fields(*, cluster, flavor, level: str, mode: str) -> dict:
    """What the job's objects carry to keep its workers in one domain: `pod_annotations` (Kueue's topology
    request on the pod sets) and `network_topology` (a vcjob's), each empty where the scheduler does not use it."""
    return backend_for(cluster).placement_fields(cluster=cluster, flavor=flavor, level=level, mode=mode)


def placement_sentence(job, spot_flavors: set[str]) -> str:
    """Where the cluster put the job and why, from what its status sync recorded; '' before it is placed."""
    flavors = job.placement.get("flavors") or []
    domain = _domain_phrase(job, job.placement) if job.topology_level else ""
    if not flavors and not domain:
        return ""
    parts = [f"Placed on flavor {', '.join(flavors)}" if flavors else "Placed"]
    spot = [f for f in flavors if f in spot_flavors]
    if spot and job.flavor.name not in spot:
        parts.append(f"spot capacity, because the reserved flavor {job.flavor.name} was full; it can be evicted")
    elif spot:
        parts.append("spot capacity; it can be evicted")
    return "; ".join(parts + [domain] if domain else parts) + "."


def _domain_phrase(job, placed: dict) -> str:
    """Kueue gives each pod set's domains at the job's level. Volcano gives the one HyperNode holding the whole
    gang: narrower than the level (it tries the narrowest tier first), or, when only preferred, wider; `spread`
    when no HyperNode holds it all."""
    level, levels = job.topology_level, job.cluster.topology_levels
    how = "as required" if job.topology_mode == Placement.REQUIRED else "as preferred"
    if placed.get("spread"):
        return f"workers spread over several {level}s (no single one had room)"
    if placed.get("unmapped"):
        return "its nodes are in no HyperNode, so Volcano had no network topology to keep them to"
    domains, label = placed.get("domains") or [], level_label(levels, level)
    within = sorted({d.get(label, "") for d in domains})
    if within and within != [""]:
        if len(within) == 1:
            return f"all workers in {level} {within[0]} ({how})"
        return f"workers spread over {level}s {', '.join(within)} (no single one had room)"
    named = [(i, lv["name"], domains[0][lv["node_label"]]) for i, lv in enumerate(levels)
             if domains and lv["node_label"] in domains[0]]
    if named:
        index, name, value = named[-1]  # levels run from the widest to the narrowest
        asked = next((i for i, lv in enumerate(levels) if lv["name"] == level), 0)
        if index > asked:
            return f"all workers in {name} {value} (within one {level}, {how})"
        return f"workers spread over several {level}s, all in {name} {value} (no single {level} had room)"
    return f"all workers in HyperNode {placed['hypernode']}" if placed.get("hypernode") else ""
