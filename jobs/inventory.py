"""The GPUs of each topology domain (a rack, a block, a host), for the forecast of jobs kept within one: from the
cluster's Nodes (a flavor's nodes are those carrying its node labels; their allocatable of its resource, grouped by
each level's node label) and the Pods bound to them (what each running job holds in which domain, and what pods
of no job the forecast knows take for good).

Pure functions over the dicts read from the API server; no database, no clock.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from portal.kube import quantity_units

from .manifests import JOB_LABEL

DONE_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class FlavorNodes:
    """What picks a flavor's nodes and counts its GPUs: its name, the resource pods ask for, its node labels."""

    name: str
    resource: str
    node_labels: dict


@dataclass(frozen=True)
class Inventory:
    """`sizes`: per (flavor, level) the GPUs each domain holds for the forecast (its nodes' allocatable, less what
    pods of no running job take); `held`: per running job id, ((level, domain, GPUs), ...) its pods hold."""

    sizes: dict[tuple[str, str], dict[str, int]]
    held: dict[int, tuple[tuple[str, str, int], ...]]


def pod_gpus(pod: dict, resource: str) -> int:
    """What the pod asks of the resource: its containers' requests (an extended resource's request equals its
    limit, and a limit alone stands for both)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        total += quantity_units((resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(
            resource, 0)))
    return total


def domain_inventory(*, nodes: list[dict], pods: list[dict], flavors: list[FlavorNodes], levels: list[dict],
                     running: set[int]) -> Inventory:
    """The domains of every level of every flavor, and where the running jobs' pods are. A node that is cordoned
    or lacks a level's label counts in no domain of that level."""
    sizes: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    where: dict[str, dict[str, str]] = {}  # node → level → domain
    flavors_of: dict[str, list[FlavorNodes]] = defaultdict(list)
    for node in nodes:
        meta, spec = node.get("metadata") or {}, node.get("spec") or {}
        labels, name = meta.get("labels") or {}, meta.get("name", "")
        if spec.get("unschedulable"):
            continue
        where[name] = {lv["name"]: labels[lv["node_label"]] for lv in levels if lv["node_label"] in labels}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for flavor in flavors:
            if all(labels.get(k) == v for k, v in flavor.node_labels.items()) and flavor.resource in allocatable:
                flavors_of[name].append(flavor)
                for level, domain in where[name].items():
                    sizes[(flavor.name, level)][domain] += quantity_units(allocatable[flavor.resource])
    held: dict[int, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if node not in where or (pod.get("status") or {}).get("phase") in DONE_PHASES:
            continue
        job = (pod.get("metadata") or {}).get("labels", {}).get(JOB_LABEL, "")
        job_id = int(job) if job.isdigit() else None
        for flavor in flavors_of[node]:
            gpus = pod_gpus(pod, flavor.resource)
            for level, domain in where[node].items():
                if job_id in running:
                    held[job_id][(level, domain)] += gpus
                else:  # a pod of no job the forecast replays: its GPUs stay taken
                    sizes[(flavor.name, level)][domain] -= gpus
            if gpus and job_id in running:
                break  # one flavor's resource per pod: counted once even where flavors share nodes
    return Inventory(
        sizes={key: {domain: max(0, units) for domain, units in domains.items()} for key, domains in sizes.items()},
        held={job: tuple((level, domain, units) for (level, domain), units in sorted(per.items()) if units)
              for job, per in held.items()})


def most_free(domains: dict[tuple[str, str], dict[str, int]], works) -> dict[tuple[str, str], int]:
    """Per (flavor, level), the most units free now in any one domain: its size less what the running jobs hold
    there (`Work.held`, else the domain a required level placed them in)."""
    used: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for w in works:
        if not w.running:
            continue
        if w.held:
            for level, domain, units in w.held:
                used[(w.flavor, level)][domain] += units
        elif w.level and w.domain:
            used[(w.flavor, w.level)][w.domain] += w.units
    return {key: max((size - used[key][domain] for domain, size in sizes.items()), default=0)
            for key, sizes in domains.items()}


def placement_held(placement: dict, levels: list[dict], units: int) -> tuple[tuple[str, str, int], ...]:
    """Where a running job is, from the placement its scheduler recorded (Kueue's topology assignment: each pod
    set's domain as node label → value; Volcano's HyperNode, as its level's label), for a job whose pods were not
    found on the flavor's nodes: the levels at which all of it is within one domain."""
    domains = (placement or {}).get("domains") or []
    held = []
    for level in levels:
        values = {domain.get(level["node_label"]) for domain in domains}
        if len(values) == 1 and None not in values:
            held.append((level["name"], values.pop(), units))
    return tuple(held)
