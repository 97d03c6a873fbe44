"""One backend per batch scheduler: everything the portal does differently under Kueue and under Volcano.

`backend_for(cluster)` gives the cluster's backend; no module outside this package compares schedulers. A
backend owns its kinds (a team's queue objects, the cluster-wide ones, what a job becomes, the record the
scheduler keeps of a job), its builders (`<name>_manifests.py`, pure), reading a job's state from its objects,
the Events in which it refuses a job, preparing a cluster's plan and the order it is applied in, and its
preemption messages in words.

A third scheduler (KAI, YuniKorn) is one new module here, imported below, filling in the `Backend` protocol
(`base.py`), plus its value in `tenants.choices.Scheduler`:

    class YuniKorn:
        name = Scheduler.YUNIKORN
        team_kinds = [...]            # e.g. the team's queue object, if it is a CRD
        cluster_kinds = [...]
        job_kinds = [("batch/v1", "Job")]
        record_kind = (...)           # the object in which it says a job waits or runs
        refusal_events = ""           # an Event field selector, when only Events say why a job waits
        cohort_tree = False
        prefers_reserved = True
        placement_from_pods = False
        cpu_memory_per_flavor = False
        discovers_hypernodes = False
        def team_parent(self, cluster, department): ...
        def team_queue_objects(self, spec, cluster): ...       # from a `TeamQuotaSpec`
        def cluster_objects(self, cluster, *, flavors, departments, tiers, team_specs): ...
        def prepare_cluster(self, desired, actual, *, widen): return Prepared(desired)
        def apply_levels(self, objects, *, children_first): return [objects]
        def scheduler_setup(self): return []                    # its own config the portal's queues need
        def flavor_setup(self, flavor): return []                # what its own config needs for a flavor
        def queue_limit_problem(self, flavors): return ""       # a limit of its queue objects they exceed
        def flavor_in_use(self, flavor_name, resource, quota_status): return None
        def scheduling_labels(self, spec): ...                 # the labels that send a job to its queue
        def job_objects(self, spec, parts): ...                # assembled from `JobParts`
        def ray_labels(self, spec): return {}
        def topology_problem(self, *, cluster, flavor, kind, level): return ""
        def placement_fields(self, *, cluster, flavor, level, mode): ...
        def observe(self, kind, job, record, refusals): ...    # -> observe.Observed
        def preempted_sentence(self, message): return ""
        def forecast_policy(self): ...                         # its admission, for estimates (`forecast.Policy`)
        def estimate_world(self, holdings, *, cohort, capacity, resources): ...
        def estimate(self, world, works, now): ...

    BACKEND = base.register(YuniKorn())
"""

# Registration: each module registers its backend when imported.
from . import kueue, volcano  # noqa: F401
from .base import (
    Backend,
    JobParts,
    Prepared,
    backend_for,
    backends,
    keep_latest_refusal,
    latest_refusals,
    record_owner,
)

__all__ = ["Backend", "JobParts", "Prepared", "backend_for", "backends", "keep_latest_refusal", "latest_refusals",
           "record_owner"]
