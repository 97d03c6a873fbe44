"""The seam between the portal and a batch scheduler: the `Backend` protocol, and the rules every backend shares
(the latest of a scheduler's refusal events, the job a scheduler's record belongs to).

A backend is one object per scheduler, registered in `portal.schedulers` and found by `backend_for(cluster)`;
nothing outside `backends/` compares schedulers. Its methods are pure, as the builders are: values and plain dicts
in, plain dicts or values out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from portal.schedulers import backend_for, backends, register

__all__ = ["Backend", "JobParts", "Prepared", "backend_for", "backends", "register"]

Kind = tuple[str, str]  # (apiVersion, kind)
# Asked of a budget's `hold_message`: whatever holds the team, on any flavor.
ANY_FLAVOR = ("*",)


class JobParts(Protocol):
    """The scheduler-neutral builders of a job's objects (`jobs.manifests`), handed to a backend so that it
    assembles its own shapes from them without importing the app above it."""

    def metadata(self, spec, *, scheduling: bool = True) -> dict: ...

    def template(self, spec, *, container: str, env: list[dict] | None = None, **pod) -> dict: ...


class Backend(Protocol):
    """What the portal asks of a scheduler. `name` is the `tenants.choices.Scheduler` value a cluster names."""

    name: str
    # Kinds it owns: a team's queue objects, the cluster-wide ones, what a job becomes, and the record it keeps of
    # each job (Kueue's Workload, Volcano's PodGroup).
    team_kinds: Sequence[Kind]
    cluster_kinds: Sequence[Kind]
    job_kinds: Sequence[Kind]
    record_kind: Kind
    # The field selector of the Events that say why it keeps a job waiting ("" when its record says it itself).
    refusal_events: str
    # Whether its quota has fair shares across a tree of cohorts (else proportion among sibling queues).
    cohort_tree: bool
    # Whether a team's queue sits under queues of the cluster's own that must hold it at every moment (Volcano's
    # department and cohort queues): those grow before a team's queue changes and take their exact size after.
    queues_under_cluster_queues: bool
    # Whether a job allowed on spot also prefers its reserved flavor's nodes (the scheduler has no flavor order).
    prefers_reserved: bool
    # Whether a job kept to a topology level has its place read from its pods' nodes (the scheduler records none).
    placement_from_pods: bool
    # Whether it builds its own topology objects (Volcano's HyperNodes) from the cluster's node labels.
    discovers_hypernodes: bool
    # Whether it orders queues by their usage decayed over time (Kueue's admission fair sharing).
    decays_usage: bool
    # Whether a team's CPU and memory quota is held per GPU flavor (Kueue: each flavor of the ClusterQueue carries
    # its own), rather than one pool for the team in the cluster (Volcano's queue capability).
    cpu_memory_per_flavor: bool

    # --- queues -------------------------------------------------------------------------------------------
    def team_parent(self, cluster, department: str | None) -> str: ...

    def team_queue_objects(self, spec, cluster) -> list[dict]: ...

    def cluster_objects(self, cluster, *, flavors: list, departments: list, tiers,
                        team_specs: Callable[[], list]) -> list[dict]: ...

    def prepare_cluster(self, desired: list[dict], actual: list[dict], *, widen: bool) -> Prepared: ...

    def apply_levels(self, objects: list[dict], *, children_first: bool) -> list[list[dict]]: ...

    def scheduler_setup(self) -> list[dict]: ...

    def flavor_setup(self, flavor) -> list[tuple[str, str]]: ...

    # Why the cluster could not offer these GPU flavors (rows of `tenants.GpuFlavor`) in a team's queue: a limit of
    # the scheduler's queue objects; "" when it can.
    def queue_limit_problem(self, flavors: list) -> str: ...

    def flavor_in_use(self, flavor_name: str, resource: str, quota_status: dict) -> int | None: ...

    # Usage the scheduler remembers over time (Kueue's admission fair sharing): from a team's queue objects as
    # listed, {"consumed": {resource: units}, "updated": when}; None when the scheduler keeps none.
    def decayed_usage(self, objects: list[dict]) -> dict | None: ...

    # --- jobs ---------------------------------------------------------------------------------------------
    def scheduling_labels(self, spec) -> dict[str, str]: ...

    def job_objects(self, spec, parts: JobParts) -> list[dict]: ...

    def ray_labels(self, spec) -> dict[str, str]: ...

    def topology_problem(self, *, cluster, flavor, kind: str, level: str) -> str: ...

    def placement_fields(self, *, cluster, flavor, level: str, mode: str) -> dict: ...

    def observe(self, kind: str, job: dict, record: dict | None, refusals: dict[str, str]) -> Any: ...

    def preempted_sentence(self, message: str) -> str: ...

    # --- budgets (`billing.enforce`): how a team held by its budget or an allowance is held in the scheduler ---
    # The admission check its teams' queues list ("" when it has none), and whether the portal keeps a held
    # team's new jobs itself (the scheduler would refuse them) rather than handing them to the scheduler.
    budget_check: str
    budget_holds_in_portal: bool
    budget_status_kinds: Sequence[Kind]  # whose status it writes as a controller (the ClusterRole grants it)

    def budget_undecided(self, record: dict) -> bool: ...  # its record waits on the budget check's first word

    def budget_controller_reads(self) -> list[tuple]: ...  # list_all queries of the check (if any)

    def budget_controller_writes(self, objects: list[dict], now: str) -> list[dict]: ...  # the check kept Active

    def budget_reads(self, *, namespace: str, team_slug: str) -> list[tuple]: ...  # list_all queries

    def budget_writes(self, objects: list[dict], *, queue_name: str, hold_message: Callable, now: str,
                      release_after: int = 0) -> list[dict]: ...  # status applies that hold or release its work

    # --- estimates (`forecast`: a pure replay of the scheduler's admission) ----------------------------------
    def estimate_world(self, holdings: list, *, cohort: str, capacity: dict[str, int],
                       resources: dict[str, str]) -> Any: ...  # a `forecast.World`

    def estimate(self, world, works: list, now: float, later: tuple = ((), (), ())) -> dict: ...  # job key →
    # `forecast.Estimate`; `later`: per replay, the jobs expected to be submitted later (`arrivals`)

    def forecast_policy(self) -> Any: ...  # its `forecast.Policy`


# --- rules every backend shares -----------------------------------------------------------------------------


def event_key(name: str, reason: str) -> str:
    """Where `keep_latest_refusal` keeps the latest Event of this reason about the object `name`."""
    return f"{name}/{reason}" if reason else name


def keep_latest_refusal(latest: dict[str, tuple[str, str]], event: dict) -> bool:
    """Keep in `latest` (`event_key` of object name and reason → (when, message)) the event if it is the newest of
    its reason for its object; whether it was. The one rule for the polling sync's list and the watcher's stream
    alike."""
    name = (event.get("involvedObject") or {}).get("name", "")
    key = event_key(name, event.get("reason") or "")
    when = event.get("lastTimestamp") or event.get("eventTime") or ""
    if not name or when < latest.get(key, ("", ""))[0]:
        return False
    latest[key] = (when, event.get("message", ""))
    return True


def latest_refusals(events: Iterable[dict]) -> dict[str, str]:
    latest: dict[str, tuple[str, str]] = {}
    for event in events:
        keep_latest_refusal(latest, event)
    return {name: message for name, (_, message) in latest.items()}


# Set by each backend: the label its controller writes on a record naming the job it belongs to.
JOB_NAME_LABELS: list[str] = []


def record_owner(obj: dict) -> str:
    """The job a scheduler's record (Workload, PodGroup) belongs to: its owner reference, else its job-name label."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") in ("Job", "RayJob"):
            return ref["name"]
    labels = obj["metadata"].get("labels") or {}
    return next((labels[label] for label in JOB_NAME_LABELS if labels.get(label)), obj["metadata"]["name"])


@dataclass(frozen=True)
class Prepared:
    """A cluster's desired objects as its scheduler can take them now, and (where it has them) the flavors being
    made again, which the cluster row records."""

    desired: list[dict]
    remaking: list[str] | None = None
