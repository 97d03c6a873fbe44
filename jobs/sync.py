"""The job status sync: what a cluster's objects say of each active job (state, message, placement, times), read
by one list per kind per namespace (the polling sync) or from the watcher's cache (`job_changes`), and written
to the rows only where something changed."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import replace
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from backends import backend_for, latest_refusals, record_owner
from backends.observe import REQUEUED, Observed
from portal import kube
from portal.naming import managed_selector
from tenants import webhooks
from tenants.models import Cluster
from tenants.selectors import active_clusters
from tenants.services import notify_users

from . import hypernodes, nodes, selectors, status, tasks, waits
from .choices import TERMINAL_STATES, JobKind, JobState, WaitReason
from .manifests import JOB_LABEL
from .models import Job

log = logging.getLogger(__name__)


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


RUN_OR_DONE = {JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED}
PLACED = RUN_OR_DONE | {JobState.ADMITTED}


def _state_changes(job: Job, observed: Observed, now, pods_started: str | None = None) -> dict:
    """The fields of a job row that the observed state changes (nothing when it is already known).

    Times are the cluster's: admission from the scheduler's record, the start from the pods (else the job
    object), so a queue wait is exact rather than rounded up to the sync interval. Only when the cluster gives
    no admission time is it the start, or failing that the moment the sync saw it."""
    changes = {}
    if observed.state != job.state:
        changes["state"] = observed.state
    if observed.message != job.state_message:
        changes["state_message"] = observed.message
    if observed.placement and observed.placement != job.placement:  # an evicted job keeps where it last was
        changes["placement"] = observed.placement
    started = None
    if observed.state in RUN_OR_DONE:  # an admitted job's pods may still be pulling images: not started yet
        started = _parse_time(pods_started) or _parse_time(observed.started_at)
    if started and job.started_at is None:
        changes["started_at"] = started
    if observed.admitted and job.admitted_at is None:
        admitted = _parse_time(observed.admitted_at) or started or now
        first_start = job.started_at or started
        # The cluster's times are whole seconds and its clock is not ours: never admitted before it was submitted
        # (a queue wait of -1 s), nor after it started.
        admitted = max(admitted, job.submitted_at)
        changes["admitted_at"] = min(admitted, first_start) if first_start else admitted
    if observed.state in TERMINAL_STATES and job.finished_at is None:
        changes["finished_at"] = _parse_time(observed.finished_at) or now
    return changes


def _changed(job: Job, changes: dict) -> None:
    """Bring the in-memory row up to date after its changes were written; notify on the ends that matter."""
    previous = job.state
    was_held = waits.wait_reason(job.state, job.state_message) == WaitReason.BUDGET
    for name, value in changes.items():
        setattr(job, name, value)
    if not was_held and waits.wait_reason(job.state, job.state_message) == WaitReason.BUDGET:
        _held(job)
    if job.notify and previous != job.state and job.state in (JobState.SUCCEEDED, JobState.FAILED,
                                                              JobState.PREEMPTED):
        notify_users(users=[job.submitted_by], subject=f"Job {job.name} {job.get_state_display().lower()}",
                     body=f"{job.team.slug}/{job.object_name}: {job.get_state_display()}. {job.state_message}")
    if previous != job.state and job.state == JobState.PREEMPTED:
        # Work is being lost: the team's webhook hears it whatever the submitter chose for e-mail.
        sentence = backend_for(job.cluster).preempted_sentence(job.state_message)
        webhooks.notice(team=job.team, event="job.preempted", subject=f"Job {job.name} preempted",
                        reason=sentence or job.state_message, next_step=REQUEUED,
                        data={"job": {"id": job.pk, "name": job.name, "object": job.object_name,
                                      "cluster": job.cluster.name, "scheduler_message": job.state_message}})


def _held(job: Job) -> None:
    """A waiting job the team's budget now holds: its submitter (if they asked for mail) and the team's webhook are
    told at once, with the sentence that names the budget and who can lift it."""
    if job.notify:
        notify_users(users=[job.submitted_by], subject=f"Job {job.name} held by the budget",
                     body=f"{job.team.slug}/{job.object_name}: {job.state_message}\n\nIt starts by itself once "
                          "the hold lifts (the window rolls, the budget or allowance is raised, or an override is "
                          "granted).")
    webhooks.notice(team=job.team, event="job.held", subject=f"Job {job.name} held by the budget",
                    reason=job.state_message, next_step="waits; starts by itself once the hold lifts",
                    data={"job": {"id": job.pk, "name": job.name, "object": job.object_name,
                                  "cluster": job.cluster.name}})


def set_state(job: Job, observed: Observed, now) -> bool:
    """Write one job's observed state only when it changed."""
    changes = _state_changes(job, observed, now)
    if not changes:
        return False
    with transaction.atomic():
        waits.wait_changes_write([(job, changes)], now)
        Job.objects.filter(pk=job.pk).update(**changes)
    _changed(job, changes)
    return True


def _observe(job: Job, objects: dict[str, dict], records: dict[str, dict], refusals: dict[str, str]):
    name = job.object_name
    found = objects.get(f"RayJob/{name}" if job.kind == JobKind.RAY else f"Job/{name}")
    if found is None:
        return None
    return backend_for(job.cluster).observe(job.kind, found, records.get(name), refusals)


def _job_pods(client, namespace: str) -> dict[str, status.JobPods]:
    """Per job id, when its first pod started running (the cluster's time) and the nodes its pods are on."""
    pods = client.list("v1", "Pod", namespace=namespace, label_selector=f"{managed_selector()},{JOB_LABEL}")
    return status.pods_by_job(pods, JOB_LABEL)


def job_status_sync(*, cluster) -> dict:
    """Read every active job's objects with one list per kind per namespace and update rows in bulk."""
    jobs = selectors.of_cluster(selectors.active_jobs(cluster=cluster), cluster)
    by_namespace: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        by_namespace[job.team.namespace].append(job)
    client = kube.client_for_cluster(cluster)
    now = timezone.now()
    counts = {"jobs": len(jobs), "changed": 0, "vanished": 0, "lists": 0}
    changed: list[tuple[Job, dict]] = []
    kinds = selectors.job_kinds(cluster.scheduler, claims=False)
    backend = backend_for(cluster)
    for namespace, members in by_namespace.items():
        objects, records = {}, {}
        for api_version, kind in kinds:
            counts["lists"] += 1
            for obj in client.list(api_version, kind, namespace=namespace, label_selector=managed_selector()):
                objects[f"{kind}/{obj['metadata']['name']}"] = obj
        counts["lists"] += 1
        for obj in client.list(*backend.record_kind, namespace=namespace):
            records[record_owner(obj)] = obj
        refusals = {}
        if backend.refusal_events:
            counts["lists"] += 1
            refusals = latest_refusals(client.list("v1", "Event", namespace=namespace,
                                                   field_selector=backend.refusal_events))

        def job_pods(namespace=namespace):
            counts["lists"] += 1
            return _job_pods(client, namespace)

        changed += job_changes(members, objects, records, refusals, job_pods, now, counts)
    _write_changes(changed)
    counts["changed"] = len(changed)
    return counts


VANISHED = "The job's objects disappeared from the cluster."


def job_changes(members: list[Job], objects: dict[str, dict], records: dict[str, dict], refusals: dict[str, str],
                job_pods, now, counts: dict | None = None) -> list[tuple[Job, dict]]:
    """What one namespace's objects change on its jobs' rows, whoever read them (the polling sync's lists or the
    watcher's cache): `objects` by "Kind/name", the scheduler's records (Workloads, PodGroups) by their job's name,
    `refusals` by record name, and `job_pods()` (called only when needed) per job id its pods' start and nodes."""
    observations = []
    for job in members:
        observed = _observe(job, objects, records, refusals)
        if observed is None:
            if job.cancel_requested_at:
                observed = Observed(JobState.CANCELLED, job.cancel_reason or "Cancelled by the user")
            else:
                if counts is not None:
                    counts["vanished"] += 1
                observed = Observed(JobState.FAILED, VANISHED)
        observations.append((job, observed))
    # Pods are read only when a job is seen running (or done) for the first time: its start is theirs, and so is
    # a Volcano gang's place in the network.
    unplaced = {job.pk for job, observed in observations if _volcano_unplaced(job, observed)}
    pods = {}
    if unplaced or any(job.started_at is None and observed.state in RUN_OR_DONE for job, observed in observations):
        pods = job_pods()
    changed = []
    for job, observed in observations:
        if job.topology_level and nodes.lacks_level(job, observed.placement):
            observed = replace(observed, placement=nodes.with_levels(job, observed.placement))
        found = pods.get(str(job.pk), status.JobPods())
        if job.pk in unplaced and found.nodes:
            topology, labelled = selectors.volcano_topology(cluster=job.cluster, nodes=set(found.nodes))
            observed = replace(observed, placement=hypernodes.placement(topology, labelled))
        changes = _state_changes(job, observed, now, found.started)
        if changes:
            changed.append((job, changes))
    return changed


def _volcano_unplaced(job: Job, observed: Observed) -> bool:
    """A Volcano job kept to a network tier whose place is not known yet: admitted (its pods being bound), running
    or done with no placement recorded, or running again after an eviction or its admission (the rest of the gang
    may have been bound since)."""
    return (backend_for(job.cluster).placement_from_pods and bool(job.topology_level)
            and observed.state in PLACED
            and (not job.placement or observed.state == JobState.RUNNING and job.state != JobState.RUNNING))


def job_changes_write(changed: list[tuple[Job, dict]]) -> None:
    _write_changes(changed)


JOB_SYNC_CONDITION = "JobsSynced"


def job_status_sync_all() -> dict:
    """Sync every active cluster in turn. One that fails (unreachable, refusing, answering nonsense) is reported,
    on its row and in the result, and the others are still synced."""
    from .watch import watcher_active

    report: dict = {"synced": {}, "failed": {}, "watched": []}
    for cluster in active_clusters().order_by("pk"):
        if watcher_active(cluster):  # the watcher keeps this cluster's jobs live
            report["watched"].append(cluster.name)
            continue
        try:
            report["synced"][cluster.name] = job_status_sync(cluster=cluster)
        except kube.KubeError as exc:
            report["failed"][cluster.name] = str(exc)
            log.warning("job status sync of cluster %s failed: %s", cluster.name, exc)
        except Exception as exc:  # noqa: BLE001 - whatever one cluster does, the next is still synced
            report["failed"][cluster.name] = f"{type(exc).__name__}: {exc}"
            log.exception("job status sync of cluster %s failed", cluster.name)
        _record_sync(cluster, report["failed"].get(cluster.name, ""))
    return report


def _record_sync(cluster: Cluster, error: str) -> None:
    """A `JobsSynced` condition on the cluster row, written only when it changes (a steady sync writes nothing)."""
    previous = next((c for c in cluster.conditions if c.get("type") == JOB_SYNC_CONDITION), {})
    status_ = "False" if error else "True"
    if previous.get("status") == status_ and previous.get("message", "") == error:
        return
    condition = {"type": JOB_SYNC_CONDITION, "status": status_, "reason": "SyncFailed" if error else "Synced",
                 "message": error, "lastTransitionTime": timezone.now().isoformat(timespec="seconds")}
    conditions = [c for c in cluster.conditions if c.get("type") != JOB_SYNC_CONDITION] + [condition]
    Cluster.objects.filter(pk=cluster.pk).update(conditions=conditions)
    cluster.conditions = conditions


def _write_changes(changed: list[tuple[Job, dict]]) -> None:
    """One UPDATE per distinct set of changes (jobs moving alike share one), then the notifications."""
    if not changed:
        return
    groups: dict[str, tuple[dict, list[int]]] = {}
    for job, changes in changed:  # keyed by their text: a placement is a dict
        groups.setdefault(json.dumps(changes, sort_keys=True, default=str), (changes, []))[1].append(job.pk)
    with transaction.atomic():
        waits.wait_changes_write(changed, timezone.now())
        for changes, pks in groups.values():
            Job.objects.filter(pk__in=pks).update(**changes)
    for job, changes in changed:
        _changed(job, changes)
    for cluster_id in {job.cluster_id for job, _ in changed}:
        # The cluster's jobs moved, so may every estimate on it: recomputed once the states are committed, by a
        # worker, outside the sync's own budget.
        transaction.on_commit(lambda cluster_id=cluster_id: tasks.job_estimates_refresh_soon(cluster_id))

