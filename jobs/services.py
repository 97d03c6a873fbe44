"""Writes for jobs: submit (with pre-submit feasibility), cancel, resubmit, and the job reconcile and
status sync. A job's objects are created once and never updated (the scheduler mutates them after admission);
cancel deletes them and keeps the row."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import replace
from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from portal import kube
from portal.errors import Conflict
from portal.naming import managed_selector
from portal.reconcile import Outcome, converge, plan, record
from tenants.choices import Role, Scheduler, TeamState
from tenants.models import Cluster, GpuFlavor, PriorityTier, Team, TeamNamespace
from tenants.selectors import active_clusters, team_role
from tenants.services import audit_record, notify_users

from . import placement, selectors, status, tasks
from .choices import TERMINAL_STATES, JobKind, JobState, Placement
from .manifests import JOB_LABEL
from .models import Job, JobTemplate

log = logging.getLogger(__name__)


def job_check_feasible(*, team: Team, flavor: GpuFlavor, tier: PriorityTier | None, workers: int,
                       gpus_per_worker: int) -> None:
    """Refuse, with the numbers, a job that could never start (submit and preview both ask this)."""
    errors = {}
    if tier is None:
        errors["priority_tier"] = "Choose one of the platform's priority tiers."
    if gpus_per_worker < 1:
        errors["gpus_per_worker"] = f"{flavor.name} is a GPU flavor: ask for at least one GPU per worker."
    elif gpus_per_worker > flavor.gpus_per_node:
        errors["gpus_per_worker"] = (f"A {flavor.name} node has {flavor.gpus_per_node} GPUs; a worker cannot use "
                                     f"{gpus_per_worker}. Use more workers with fewer GPUs each.")
    quota = selectors.team_flavor_quota(team=team, flavor=flavor)
    if quota is None or quota.limit == 0:
        errors["flavor"] = f"The team holds no {flavor.name} quota in {flavor.cluster.name}; request some first."
    elif workers * gpus_per_worker > quota.limit:
        errors["workers"] = (f"{workers} × {gpus_per_worker} = {workers * gpus_per_worker} GPUs is more than the "
                             f"team's {flavor.name} limit of {quota.limit} ({quota.guaranteed} guaranteed + "
                             f"{quota.burst} burst): it could never start.")
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def job_submit(*, actor, team: Team, flavor: GpuFlavor, kind: str, name: str, image: str, command: list[str],
               args: list[str] | None = None, env: dict | None = None, workers: int = 1, gpus_per_worker: int = 1,
               cpu_per_worker: int = 8, memory_gib_per_worker: int = 64, priority_tier: PriorityTier | None = None,
               max_runtime_minutes: int = 1440, notify: bool = True, resubmit_of: Job | None = None,
               spot_allowed: bool = False, topology_level: str = "", topology_mode: str = "",
               source_ip: str | None = None) -> Job:
    if team_role(user=actor, team=team) not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Only the team's admins and members can submit jobs.")
    if team.state != TeamState.ACTIVE:
        raise Conflict(f"The team is {team.get_state_display().lower()}.")
    if not TeamNamespace.objects.filter(team=team, cluster=flavor.cluster, deleted_at__isnull=True).exists():
        raise ValidationError({"flavor": "The team has no namespace in that cluster."})
    if kind not in JobKind.values:
        raise ValidationError({"kind": f"Unknown kind {kind!r}."})
    if priority_tier is None:
        priority_tier = PriorityTier.objects.filter(is_default=True).first()
    job = Job(team=team, cluster=flavor.cluster, flavor=flavor, priority_tier=priority_tier, kind=kind, name=name,
              image=image, command=command, args=args if args is not None else [], env=env if env is not None else {},
              workers=workers,
              gpus_per_worker=gpus_per_worker, cpu_per_worker=cpu_per_worker,
              memory_gib_per_worker=memory_gib_per_worker, max_runtime_minutes=max_runtime_minutes,
              submitted_by=actor, notify=notify, resubmit_of=resubmit_of, next_attempt_at=timezone.now(),
              spot_allowed=spot_allowed, topology_level=topology_level,
              topology_mode=(topology_mode or Placement.REQUIRED) if topology_level else "")
    if flavor.spot and not spot_allowed:
        raise ValidationError({"spot_allowed": f"{flavor.name} is spot capacity: allow spot to use it. "
                                               f"{placement.SPOT_WARNING}"})
    problem = placement.topology_problem(cluster=flavor.cluster, flavor=flavor, kind=kind, level=topology_level,
                                         mode=job.topology_mode)
    if problem:
        raise ValidationError({"topology_level": problem})
    if kind == JobKind.RAY and not job.command:
        raise ValidationError({"command": "A Ray job needs an entrypoint command."})
    job.full_clean(exclude=["priority_tier"] if priority_tier is None else None)
    job_check_feasible(team=team, flavor=flavor, tier=priority_tier, workers=workers,
                       gpus_per_worker=gpus_per_worker)
    job.save()
    audit_record(actor=actor, action="job.submit", obj=job, team=team,
                 after={"kind": kind, "workers": workers, "gpus_per_worker": gpus_per_worker,
                        "flavor": flavor.name}, source_ip=source_ip)
    _nudge(job)
    return job


def _nudge(job: Job) -> None:
    transaction.on_commit(lambda: tasks.job_reconcile_task.delay(job.pk))


@transaction.atomic
def job_cancel(*, actor, job: Job, source_ip: str | None = None) -> Job:
    job = Job.objects.select_for_update().select_related("team").get(pk=job.pk)
    role = team_role(user=actor, team=job.team)
    if role not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Only the team's admins and members can cancel jobs.")
    if role != Role.ADMIN and job.submitted_by_id != actor.pk:
        raise PermissionDenied("Only the submitter or a team admin can cancel this job.")
    if job.terminal:
        raise Conflict(f"The job has already {job.get_state_display().lower()}.")
    job.cancel_requested_at = timezone.now()
    job.generation = F("generation") + 1
    job.next_attempt_at = timezone.now()
    job.save(update_fields=["cancel_requested_at", "generation", "next_attempt_at"])
    audit_record(actor=actor, action="job.cancel", obj=job, team=job.team, source_ip=source_ip)
    _nudge(job)
    job.refresh_from_db()
    return job


def job_resubmit(*, actor, job: Job, source_ip: str | None = None) -> Job:
    if not job.terminal and job.state != JobState.PREEMPTED:
        raise Conflict("Only a finished, failed, cancelled or preempted job can be resubmitted.")
    return job_submit(actor=actor, team=job.team, flavor=job.flavor, kind=job.kind, name=job.name, image=job.image,
                      command=job.command, args=job.args, env=job.env, workers=job.workers,
                      gpus_per_worker=job.gpus_per_worker, cpu_per_worker=job.cpu_per_worker,
                      memory_gib_per_worker=job.memory_gib_per_worker, priority_tier=job.priority_tier,
                      max_runtime_minutes=job.max_runtime_minutes, notify=job.notify, resubmit_of=job,
                      spot_allowed=job.spot_allowed, topology_level=job.topology_level,
                      topology_mode=job.topology_mode, source_ip=source_ip)


def _job_actual(client: kube.ClusterClient, job: Job) -> list[dict]:
    selector = f"{managed_selector()},{JOB_LABEL}={job.pk}"
    return [obj for api_version, kind in selectors.job_kinds(job.cluster.scheduler)
            for obj in client.list(api_version, kind, namespace=job.team.namespace, label_selector=selector)]


def job_reconcile(*, job_id: int) -> Outcome:
    """Create the job's objects if missing (never update them), or delete them once cancelled."""
    job = Job.objects.select_related("team", "cluster", "flavor", "priority_tier").filter(pk=job_id).first()
    if job is None or not job.cluster.active:
        return Outcome(statuses=[], writes=0)
    generation = job.generation
    desired = selectors.job_desired(job=job)
    try:
        client = kube.client_for_cluster(job.cluster)
        actual = _job_actual(client, job)
    except kube.KubeError as exc:
        return record(job, generation, Outcome(statuses=job.objects_status, writes=0, error=exc))
    the_plan = plan(desired, actual, update=False)
    outcome = record(job, generation, converge(client, the_plan))
    if outcome.error is None:
        if job.cancel_requested_at and job.state != JobState.CANCELLED:
            _set_state(job, status.Observed(JobState.CANCELLED, "Cancelled by the user"), timezone.now())
        elif job.state == JobState.PENDING and desired:
            _set_state(job, status.Observed(JobState.QUEUED), timezone.now())
    return outcome


def job_reconcile_due(*, limit: int = 500) -> int:
    """Jobs whose objects were not created or deleted yet (a lost nudge, or a transient error). One job that
    fails in an unforeseen way is logged and the rest still run."""
    done = 0
    for pk in selectors.jobs_due(limit=limit):
        try:
            job_reconcile(job_id=pk)
        except Exception:  # noqa: BLE001 - the next job (maybe on another cluster) must still be reconciled
            log.exception("reconcile of job %s failed", pk)
        done += 1
    return done


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


RUN_OR_DONE = {JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED}


def _state_changes(job: Job, observed: status.Observed, now, pods_started: str | None = None) -> dict:
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
        changes["admitted_at"] = min(admitted, first_start) if first_start else admitted
    if observed.state in TERMINAL_STATES and job.finished_at is None:
        changes["finished_at"] = _parse_time(observed.finished_at) or now
    return changes


def _changed(job: Job, changes: dict) -> None:
    """Bring the in-memory row up to date after its changes were written; notify on the ends that matter."""
    previous = job.state
    for name, value in changes.items():
        setattr(job, name, value)
    if job.notify and previous != job.state and job.state in (JobState.SUCCEEDED, JobState.FAILED,
                                                              JobState.PREEMPTED):
        notify_users(users=[job.submitted_by], subject=f"Job {job.name} {job.get_state_display().lower()}",
                     body=f"{job.team.slug}/{job.object_name}: {job.get_state_display()}. {job.state_message}")


def _set_state(job: Job, observed: status.Observed, now) -> bool:
    """Write one job's observed state only when it changed."""
    changes = _state_changes(job, observed, now)
    if not changes:
        return False
    Job.objects.filter(pk=job.pk).update(**changes)
    _changed(job, changes)
    return True


def _observe(job: Job, objects: dict[str, dict], workloads: dict[str, dict], podgroups: dict[str, dict],
             refusals: dict[str, str]):
    name = job.object_name
    found = objects.get(f"RayJob/{name}" if job.kind == JobKind.RAY else f"Job/{name}")
    if found is None:
        return None
    workload, podgroup = workloads.get(name), podgroups.get(name)
    if job.kind == JobKind.RAY:
        observed = status.ray_job(found, workload)
    elif job.cluster.scheduler == Scheduler.KUEUE:
        observed = status.kueue_batch_job(found, workload)
    else:
        refusal = refusals.get(((podgroup or {}).get("metadata") or {}).get("name", ""), "")
        observed = status.volcano_job(found, podgroup, refusal)
    if job.cluster.scheduler == Scheduler.VOLCANO:
        hypernode = status.allocated_hypernode(podgroup)
        placed = status.volcano_placement(podgroup, selectors.hypernode_labels(
            cluster=job.cluster, name=hypernode) if hypernode else {})
    else:
        placed = status.kueue_placement(workload)
    return replace(observed, admitted_at=status.admission_time(found, workload, podgroup), placement=placed)


def _pods_started(client, namespace: str) -> dict[str, str]:
    """Per job id, when its first pod started running (the cluster's time)."""
    started: dict[str, str] = {}
    for pod in client.list("v1", "Pod", namespace=namespace, label_selector=f"{managed_selector()},{JOB_LABEL}"):
        job_id = (pod["metadata"].get("labels") or {}).get(JOB_LABEL)
        when = status.pod_start_time(pod)
        if job_id and when and (job_id not in started or when < started[job_id]):
            started[job_id] = when
    return started


def job_status_sync(*, cluster) -> dict:
    """Read every active job's objects with one list per kind per namespace and update rows in bulk."""
    jobs = list(selectors.active_jobs(cluster=cluster))
    by_namespace: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        by_namespace[job.team.namespace].append(job)
    client = kube.client_for_cluster(cluster)
    now = timezone.now()
    counts = {"jobs": len(jobs), "changed": 0, "vanished": 0, "lists": 0}
    changed: list[tuple[Job, dict]] = []
    kinds = selectors.job_kinds(cluster.scheduler, claims=False)
    extra = ([("kueue.x-k8s.io/v1beta2", "Workload")] if cluster.scheduler == Scheduler.KUEUE
             else [("scheduling.volcano.sh/v1beta1", "PodGroup")])
    for namespace, members in by_namespace.items():
        objects, workloads, podgroups = {}, {}, {}
        for api_version, kind in kinds:
            counts["lists"] += 1
            for obj in client.list(api_version, kind, namespace=namespace, label_selector=managed_selector()):
                objects[f"{kind}/{obj['metadata']['name']}"] = obj
        for api_version, kind in extra:
            counts["lists"] += 1
            for obj in client.list(api_version, kind, namespace=namespace):
                owner = owner_name(obj)
                (workloads if kind == "Workload" else podgroups)[owner] = obj
        refusals = {}
        if cluster.scheduler == Scheduler.VOLCANO:
            counts["lists"] += 1
            refusals = _enqueue_refusals(client, namespace)

        def pods_started(namespace=namespace):
            counts["lists"] += 1
            return _pods_started(client, namespace)

        changed += job_changes(members, objects, workloads, podgroups, refusals, pods_started, now, counts)
    _write_changes(changed)
    counts["changed"] = len(changed)
    return counts


VANISHED = "The job's objects disappeared from the cluster."


def job_changes(members: list[Job], objects: dict[str, dict], workloads: dict[str, dict], podgroups: dict[str, dict],
                refusals: dict[str, str], pods_started, now, counts: dict | None = None) -> list[tuple[Job, dict]]:
    """What one namespace's objects change on its jobs' rows, whoever read them (the polling sync's lists or the
    watcher's cache): `objects` by "Kind/name", Workloads and PodGroups by their job's name, `refusals` by PodGroup
    name, and `pods_started()` (called only when needed) per job id the time its first pod started."""
    observations = []
    for job in members:
        observed = _observe(job, objects, workloads, podgroups, refusals)
        if observed is None:
            if job.cancel_requested_at:
                observed = status.Observed(JobState.CANCELLED, "Cancelled by the user")
            else:
                if counts is not None:
                    counts["vanished"] += 1
                observed = status.Observed(JobState.FAILED, VANISHED)
        observations.append((job, observed))
    # Pods are read only when a job is seen running (or done) for the first time: its start is theirs.
    started = {}
    if any(job.started_at is None and observed.state in RUN_OR_DONE for job, observed in observations):
        started = pods_started()
    changed = []
    for job, observed in observations:
        changes = _state_changes(job, observed, now, started.get(str(job.pk)))
        if changes:
            changed.append((job, changes))
    return changed


def job_changes_write(changed: list[tuple[Job, dict]]) -> None:
    _write_changes(changed)


def _enqueue_refusals(client, namespace: str) -> dict[str, str]:
    """PodGroup name → why Volcano's enqueue action last refused it. Volcano writes no condition for that, only an
    Event on the PodGroup (plugins/proportion and capacity: "queue resource quota insufficient: ...")."""
    latest: dict[str, tuple[str, str]] = {}
    events = client.list("v1", "Event", namespace=namespace,
                         field_selector="involvedObject.kind=PodGroup,reason=Unschedulable")
    for event in events:
        name = (event.get("involvedObject") or {}).get("name", "")
        when = event.get("lastTimestamp") or event.get("eventTime") or ""
        if name and when >= latest.get(name, ("", ""))[0]:
            latest[name] = (when, event.get("message", ""))
    return {name: message for name, (_, message) in latest.items()}


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
        for changes, pks in groups.values():
            Job.objects.filter(pk__in=pks).update(**changes)
    for job, changes in changed:
        _changed(job, changes)


def owner_name(obj: dict) -> str:
    """The job a Workload or PodGroup belongs to: its owner reference, else its job-name label."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") in ("Job", "RayJob"):
            return ref["name"]
    labels = obj["metadata"].get("labels") or {}
    return labels.get("kueue.x-k8s.io/job-name") or labels.get("volcano.sh/job-name") or obj["metadata"]["name"]


def _require_submitter(*, actor, team: Team) -> None:
    if team_role(user=actor, team=team) not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Viewers cannot change the team's job templates.")


@transaction.atomic
def job_template_save(*, actor, team: Team, kind: str, name: str, values: dict) -> JobTemplate:
    """Create or replace the team's template of that name (the submit form's "save as template")."""
    _require_submitter(actor=actor, team=team)
    template = JobTemplate.objects.filter(team=team, name=name).first() or JobTemplate(team=team, name=name)
    template.kind, template.values, template.created_by = kind, values, actor
    template.full_clean()
    template.save()
    audit_record(actor=actor, action="job_template.save", obj=template, team=team, after={"kind": kind})
    return template


@transaction.atomic
def job_template_delete(*, actor, template: JobTemplate, source_ip: str | None = None) -> None:
    _require_submitter(actor=actor, team=template.team)
    audit_record(actor=actor, action="job_template.delete", obj=template, team=template.team,
                 before={"kind": template.kind, "values": template.values}, source_ip=source_ip)
    template.delete()

