"""Pure builders of Volcano's Queues for a cluster and its teams (the API version in `portal.upstream`): a team's
queue, a department's and the cluster's parent queue, and a queue widened to what it holds now; and what a job is
under Volcano: a vcjob (PyTorch through its pytorch plugin). Values in, plain dicts out, deterministic names."""

from collections import defaultdict

from portal.naming import cluster_labels, dns_name, team_labels
from portal.upstream import VOLCANO_BATCH_API
from portal.upstream import VOLCANO_SCHEDULING_API as VOLCANO_SCHEDULING

from .specs import TeamQuotaSpec, gib

VOLCANO_PYTORCH_PORT = 23456
# "No retries": no policy restarts a job on failure (a failed pod terminates it). Only an eviction by the
# scheduler's preempt/reclaim restarts it, which is how a preempted vcjob queues again; maxRetry bounds those.
# It is written out because Volcano's mutating webhook turns 0 into 3 (pkg/webhooks/admission/jobs/mutate/
# mutate_job.go, patchDefaultMaxRetry), so 0 can never mean "none".
VOLCANO_MAX_EVICTION_RESTARTS = 3
VOLCANO_POLICIES = (
    {"event": "PodFailed", "action": "TerminateJob"},
    {"event": "PodEvicted", "action": "RestartJob"},
)


def _volcano_resources(quotas, amount) -> dict[str, str]:
    per_resource: dict[str, int] = defaultdict(int)
    cpu = memory = 0
    for quota in quotas:
        per_resource[quota.flavor.volcano_key] += amount(quota)
        cpu += quota.cpu_cores
        memory += quota.memory_gib
    resources = {name: str(per_resource[name]) for name in sorted(per_resource)}
    if cpu:
        resources["cpu"] = str(cpu)
    if memory:
        resources["memory"] = gib(memory)
    return resources


def volcano_queue_manifest(team: TeamQuotaSpec, *, parent: str = "") -> dict:
    """deserved = guaranteed ≤ capability = guaranteed + burst, per resource name, and no guarantee.

    Deserved is what the capacity plugin gives back by reclaim: a queue below it reclaims pods from queues above
    theirs (plugins/capacity/capacity.go preemptiveFn, reclaimableFn), as Kueue reclaims a nominal quota lent in its
    cohort. A guarantee is something else, capacity no other queue may use even while idle: every queue is capped
    at the cluster less the other queues' guarantees (realCapability), so guaranteeing each team its quota would
    leave a fully allotted cluster nothing to borrow, and a team's burst would never run. The portal's guaranteed
    quota is lent while idle, on both schedulers.

    Volcano knows resources, not flavors: two flavors with the same resource name add up. A held (suspended)
    team gets a capability of zero: Volcano has no spec field to close a queue (state lives in status)."""
    if team.held:
        zero = {name: "0" for name in sorted({f.volcano_key for f in team.cluster_flavors})}
        spec = {"weight": team.weight, "reclaimable": True, "capability": zero}
    else:
        guaranteed = _volcano_resources(team.quotas, lambda q: q.guaranteed)
        spec = {
            "weight": team.weight,
            "reclaimable": True,
            "capability": _volcano_resources(team.quotas, lambda q: q.guaranteed + q.burst),
            "deserved": guaranteed,
        }
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": VOLCANO_SCHEDULING,
        "kind": "Queue",
        "metadata": {"name": team.queue_name, "labels": team_labels(team.slug)},
        "spec": spec,
    }


def volcano_queue_state(name: str, state: str) -> dict:
    """A Queue's status.state (Open or Closed), as `vcctl queue operate` has the queue controller write it."""
    return {"apiVersion": VOLCANO_SCHEDULING, "kind": "Queue", "metadata": {"name": name}, "status": {"state": state}}


CLOSED_QUEUE_REFUSAL = "can only submit job to queue with state `Open`"


def closed_queue_refusal(status: int, message: str) -> bool:
    """The job webhook refusing a job to a queue that is closed (volcano pkg/webhooks/admission/jobs/
    validate/admit_job.go): retried, since the queue reopens when the budget hold that closed it lifts."""
    return status in (400, 403, 422) and CLOSED_QUEUE_REFUSAL in message


def department_queue_name(slug: str) -> str:
    """Distinct from team queue names: a department is a team too and may hold a queue of its own."""
    return dns_name(slug, "dept")


def volcano_department_queue_manifest(*, name: str, children: list[TeamQuotaSpec], parent: str = "",
                                      weight: int = 1) -> dict:
    """A department's queue bounds its teams: Volcano requires Σ children's deserved ≤ the parent's."""
    return volcano_parent_queue_manifest(name=department_queue_name(name), teams=children, parent=parent,
                                         weight=weight)


def volcano_parent_queue_manifest(*, name: str, teams: list[TeamQuotaSpec], parent: str = "",
                                  weight: int = 1) -> dict:
    """A queue holding no jobs of its own, sized to the teams beneath it: deserved is the sum of
    theirs (volcano pkg/webhooks/admission/queues/validate refuses a parent below its children's sums),
    capability the sum of theirs (at least the largest, as the same webhook requires of an ancestor)."""
    quotas = [q for team in teams if not team.held for q in team.quotas]
    guaranteed = _volcano_resources(quotas, lambda q: q.guaranteed)
    spec = {
        "weight": weight,
        "reclaimable": True,
        "capability": _volcano_resources(quotas, lambda q: q.guaranteed + q.burst),
        "deserved": guaranteed,
    }
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": VOLCANO_SCHEDULING,
        "kind": "Queue",
        "metadata": {"name": name, "labels": cluster_labels()},
        "spec": spec,
    }


def volcano_queue_widened(desired: dict, live: dict | None) -> dict:
    """A queue at least as large as it is now and as it is to be, resource by resource: what a parent queue can
    be set to before the queues under it grow or shrink, in whichever direction each resource goes (the exact
    size follows once they have)."""
    if live is None or desired["kind"] != "Queue":
        return desired
    from kubernetes.utils import parse_quantity  # the client is imported lazily (portal.kube)

    def wider(wanted: dict | None, current: dict | None) -> dict:
        merged = dict(current or {})
        for name, value in (wanted or {}).items():
            if name not in merged or parse_quantity(value) >= parse_quantity(merged[name]):
                merged[name] = value
        return merged

    spec, now = dict(desired["spec"]), live.get("spec") or {}
    for part in ("capability", "deserved"):
        spec[part] = wider(spec.get(part), now.get(part))
    return {**desired, "spec": spec}


# --- jobs ----------------------------------------------------------------------------------------------------


def volcano_job_manifest(spec, parts, tasks: list[dict], plugins: dict | None = None) -> dict:
    job_spec = {
        "schedulerName": "volcano",
        "queue": spec.volcano_queue,
        "minAvailable": sum(t["replicas"] for t in tasks),
        "maxRetry": VOLCANO_MAX_EVICTION_RESTARTS,
        "policies": [dict(policy) for policy in VOLCANO_POLICIES],
        "tasks": tasks,
    }
    if plugins:
        job_spec["plugins"] = plugins
    if spec.network_topology:
        job_spec["networkTopology"] = dict(spec.network_topology)
    if spec.priority_class:
        job_spec["priorityClassName"] = spec.priority_class
    return {"apiVersion": VOLCANO_BATCH_API, "kind": "Job", "metadata": parts.metadata(spec), "spec": job_spec}


def volcano_task(spec, parts, name: str, replicas: int) -> dict:
    template = parts.template(spec, container=name, activeDeadlineSeconds=spec.max_runtime_seconds)
    return {"name": name, "replicas": replicas, "template": template}


def pytorch_job_manifest(spec, parts) -> dict:
    tasks = [volcano_task(spec, parts, "master", 1)]
    if spec.workers > 1:
        tasks.append(volcano_task(spec, parts, "worker", spec.workers - 1))
    # The pytorch plugin injects MASTER_ADDR/PORT, WORLD_SIZE and RANK. Its svc plugin would add a
    # NetworkPolicy per job; the team namespace already allows pod-to-pod traffic inside it, so that is off.
    plugins = {"pytorch": ["--master=master", "--worker=worker", f"--port={VOLCANO_PYTORCH_PORT}"],
               "svc": ["--disable-network-policy"]}
    return volcano_job_manifest(spec, parts, tasks, plugins)
