"""The watcher's cache of one cluster: the objects its informers brought, which jobs they touch, and drift.

Events only mark what moved; `flush()` (the watcher's loop, a few times a second) derives the touched jobs'
state from the cache with the polling sync's own rules and writes the real changes, stamped with the time the
first event of the batch arrived.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from backends import backend_for, keep_latest_refusal, record_owner
from portal import desired
from portal.naming import CLUSTER_SCOPE, SCOPE_LABEL, TEAM_LABEL, managed_selector
from quotas.usage import USAGE_KINDS

from . import selectors, status, sync
from .choices import JobKind
from .manifests import JOB_LABEL

POD = ("v1", "Pod")
EVENT = ("v1", "Event")


def owned_kinds(scheduler: str) -> list[tuple[str, str]]:
    """Every kind the portal owns in a cluster of this scheduler, as the desired-state registry lists them."""
    kinds = desired.team_kinds(scheduler) + desired.cluster_kinds(scheduler)
    return list(dict.fromkeys(kinds))


def watched_kinds(scheduler: str) -> list[tuple[tuple[str, str], str, str]]:
    """What the watcher watches on a cluster of this scheduler: ((apiVersion, kind), label selector, field
    selector). The RBAC test derives the ClusterRole's `watch` grants from this."""
    managed, backend = managed_selector(), backend_for(scheduler)
    kinds = [(kind, managed, "") for kind in selectors.job_kinds(scheduler, claims=False)]
    kinds.append((backend.record_kind, "", ""))
    kinds.append((POD, f"{managed},{JOB_LABEL}", ""))
    if backend.refusal_events:
        kinds.append((EVENT, "", backend.refusal_events))
    kinds += [(kind, managed, "") for kind in owned_kinds(scheduler)]
    return kinds


def _content(obj: dict) -> dict:
    """An object without what the cluster writes on its own: status and bookkeeping metadata."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields", "generation")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


log = logging.getLogger(__name__)
_GRACE = timedelta(seconds=1)  # a job's object may be created a moment before its row says so


def _name(obj: dict) -> str:
    return obj["metadata"]["name"]


def _namespace(obj: dict) -> str:
    return obj["metadata"].get("namespace", "")


class ClusterCache:
    def __init__(self, watcher):
        self.watcher = watcher
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        kinds = watched_kinds(self.watcher.scheduler)
        job_kinds = set(selectors.job_kinds(self.watcher.scheduler, claims=False))
        self._backend = backend_for(self.watcher.scheduler)
        record = self._backend.record_kind
        self._roles = {}
        for kind, _, _ in kinds:
            self._roles[kind] = ("job" if kind in job_kinds else "record" if kind == record
                                 else "pod" if kind == POD else "event" if kind == EVENT else "owned")
        with self._lock:
            self.objects: dict[str, dict[str, dict]] = defaultdict(dict)  # namespace -> "Kind/name" -> object
            self.records: dict[str, dict[str, dict]] = defaultdict(dict)  # namespace -> job name -> Workload/PodGroup
            self.pods: dict[str, dict[str, dict]] = defaultdict(dict)  # namespace -> pod name -> pod
            self.refusals: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)  # ns -> PodGroup -> (when, msg)
            self.owned: dict[tuple, dict] = {}
            self.synced: set = set()
            self.in_sync = False
            self._dirty: dict[str, set[str]] = defaultdict(set)  # namespace -> job object names or job ids
            self._all = False
            self._arrived = None
            self._missing: dict[int, object] = {}
            self._drift_teams: set[str] = set()
            self._drift_cluster = False
            self.usage: dict[str, dict[tuple, dict]] = defaultdict(dict)  # team -> key -> object in-use is read from
            self._usage_teams: set[str] = set()  # teams whose usage objects' status changed since the last flush
            self._budget_undecided = False  # a record waits on the portal's budget check

    def mark_all(self) -> None:
        """Derive every active job again at the next flush (after a failed write)."""
        with self._lock:
            self._all = True

    # Informer side ---------------------------------------------------------------------------------------------

    def replace(self, kind, items: list[dict], arrived) -> None:
        role = self._roles[kind]
        with self._lock:
            if role == "owned":
                fresh = {(kind, _namespace(o), _name(o)): o for o in items}
                if kind in self.synced:
                    for key in set(self.owned) | set(fresh):
                        if key[0] == kind and self._drifted(self.owned.get(key), fresh.get(key)):
                            self._drift(fresh.get(key) or self.owned[key])
                self.owned = {k: v for k, v in self.owned.items() if k[0] != kind} | {
                    k: _content(v) for k, v in fresh.items()}
                if kind[1] in USAGE_KINDS:
                    for objects in self.usage.values():
                        for key in [k for k in objects if k[0] == kind and k not in fresh]:
                            del objects[key]
                    for key, obj in fresh.items():
                        self._usage_put(key, obj)
            else:
                self._clear(kind, role)
                for obj in items:
                    self._put(kind, role, "ADDED", obj)
                self._all = True
                self._arrived = self._arrived or arrived
            self.synced.add(kind)

    def event(self, kind, event_type: str, obj: dict, arrived) -> None:
        role = self._roles[kind]
        with self._lock:
            if role == "owned":
                key = (kind, _namespace(obj), _name(obj))
                new = None if event_type == "DELETED" else obj
                if self._drifted(self.owned.get(key), new):
                    self._drift(obj)
                if kind[1] in USAGE_KINDS:
                    self._usage_put(key, obj, gone=new is None)
                if new is None:
                    self.owned.pop(key, None)
                else:
                    self.owned[key] = _content(new)
                return
            self._put(kind, role, event_type, obj)
            self._arrived = self._arrived or arrived

    @staticmethod
    def _drifted(old: dict | None, new: dict | None) -> bool:
        """An owned object deleted, or changed beyond its status (a first sight is reconcile's own create)."""
        return old is not None and (new is None or _content(new) != old)

    def _drift(self, obj: dict) -> None:
        labels = obj["metadata"].get("labels") or {}
        if labels.get(SCOPE_LABEL) == CLUSTER_SCOPE:
            self._drift_cluster = True
        elif labels.get(TEAM_LABEL):
            self._drift_teams.add(labels[TEAM_LABEL])

    def _usage_put(self, key: tuple, obj: dict, gone: bool = False) -> None:
        """Keep a team's quota objects whole (with status) and mark the team when their status changed."""
        team = (obj["metadata"].get("labels") or {}).get(TEAM_LABEL)
        if not team:
            return
        old = self.usage[team].pop(key, None)
        if not gone:
            self.usage[team][key] = obj
        if (old or {}).get("status") != (None if gone else obj.get("status")):
            self._usage_teams.add(team)

    def _clear(self, kind, role) -> None:
        if role == "job":
            for names in self.objects.values():
                for key in [k for k in names if k.startswith(f"{kind[1]}/")]:
                    del names[key]
        else:
            {"record": self.records, "pod": self.pods, "event": self.refusals}[role].clear()

    def _put(self, kind, role: str, event_type: str, obj: dict) -> None:
        ns, gone = _namespace(obj), event_type == "DELETED"
        if role == "job":
            key = f"{kind[1]}/{_name(obj)}"
            self.objects[ns].pop(key, None) if gone else self.objects[ns].__setitem__(key, obj)
            self._dirty[ns].add(_name(obj))
        elif role == "record":
            owner = record_owner(obj)
            if not gone and self._backend.budget_undecided(obj):
                self._budget_undecided = True
            self.records[ns].pop(owner, None) if gone else self.records[ns].__setitem__(owner, obj)
            self._dirty[ns].add(owner)
        elif role == "pod":
            self.pods[ns].pop(_name(obj), None) if gone else self.pods[ns].__setitem__(_name(obj), obj)
            self._dirty[ns].add((obj["metadata"].get("labels") or {}).get(JOB_LABEL, ""))
        elif not gone and keep_latest_refusal(self.refusals[ns], obj):
            self._dirty[ns].add("*")

    # Watcher side ----------------------------------------------------------------------------------------------

    def _job_pods(self, ns: str) -> dict[str, status.JobPods]:
        with self._lock:
            pods = list(self.pods.get(ns, {}).values())
        return status.pods_by_job(pods, JOB_LABEL)

    def flush(self) -> None:
        """Derive and write what moved since the last flush; nudge reconcile for drift."""
        with self._lock:
            if not set(self._roles).issubset(self.synced):
                return  # until every informer has listed, a missing object proves nothing
            if not self.in_sync:
                self.in_sync = True
                log.info("cluster %s in sync", self.watcher.name)
            dirty, everything, arrived = self._dirty, self._all, self._arrived
            self._dirty, self._all, self._arrived = defaultdict(set), False, None
            teams, cluster_scoped = self._drift_teams, self._drift_cluster
            self._drift_teams, self._drift_cluster = set(), False
            usage_teams, self._usage_teams = self._usage_teams, set()
            usage = {team: list(self.usage.get(team, {}).values()) for team in usage_teams}
            undecided, self._budget_undecided = self._budget_undecided, False
        if undecided:
            self.watcher.budget_decide()
        if teams or cluster_scoped:
            self.watcher.nudge(teams, cluster_scoped)
        if usage:
            self.watcher.record_usage(usage)
        if not dirty and not everything and not self._missing:
            return
        now = arrived or timezone.now()
        jobs = selectors.active_jobs(cluster=self.watcher.cluster)
        prefix = settings.NAMESPACE_PREFIX
        if not everything:
            slugs = {ns[len(prefix):] for ns in dirty if ns.startswith(prefix)}
            slugs |= {job.team.slug for job in jobs.filter(pk__in=list(self._missing))}
            jobs = jobs.filter(team__slug__in=slugs)
        by_namespace = defaultdict(list)
        for job in selectors.of_cluster(jobs, self.watcher.cluster):
            ns = job.team.namespace
            touched = dirty.get(ns, set())
            if everything or "*" in touched or job.object_name in touched or str(job.pk) in touched \
                    or job.pk in self._missing:
                by_namespace[ns].append(job)
        changed = []
        for ns, members in by_namespace.items():
            with self._lock:
                objects, records = dict(self.objects.get(ns, {})), dict(self.records.get(ns, {}))
                refusals = {name: message for name, (_, message) in self.refusals.get(ns, {}).items()}
            members = [job for job in members if self._present_or_overdue(job, objects)]
            changed += sync.job_changes(members, objects, records, refusals, lambda ns=ns: self._job_pods(ns), now)
        self.watcher.write(changed)

    def _present_or_overdue(self, job, objects: dict) -> bool:
        """A job whose object is not (yet) in the cache is judged vanished only after a grace period."""
        kind = "RayJob" if job.kind == JobKind.RAY else "Job"
        if f"{kind}/{job.object_name}" in objects or job.cancel_requested_at:
            self._missing.pop(job.pk, None)
            return True
        first = self._missing.setdefault(job.pk, timezone.now())
        if timezone.now() - first >= _GRACE:
            self._missing.pop(job.pk, None)
            return True
        return False
