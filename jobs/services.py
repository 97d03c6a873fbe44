"""Writes for jobs: submit (with pre-submit feasibility), cancel, resubmit, the job reconcile and saved templates
(the status sync is `sync`). A job's objects are created once and never updated (the scheduler mutates them
after admission); cancel deletes them and keeps the row."""

from __future__ import annotations

import logging
from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from backends.observe import Observed
from portal import kube
from portal.enqueue import enqueue_on_commit
from portal.errors import Conflict
from portal.naming import managed_selector
from portal.reconcile import Outcome, converge, plan, record
from tenants.choices import Role, TeamState
from tenants.models import GpuFlavor, PriorityTier, Team, TeamNamespace
from tenants.selectors import team_role
from tenants.services import audit_record

from . import holds, placement, pods, selectors, sync, tasks
from .choices import TERMINAL_STATES, JobKind, JobState, Placement
from .manifests import JOB_LABEL
from .models import Job, JobTemplate

log = logging.getLogger(__name__)


def job_check_feasible(*, team: Team, flavor: GpuFlavor, tier: PriorityTier | None, workers: int,
                       gpus_per_worker: int, kind: str = "", cpu_per_worker: int = 0,
                       memory_gib_per_worker: int = 0) -> None:
    """Refuse, with the numbers, a job that could never start (submit and preview both ask this). With its kind
    and pod size, also one whose pods ask for more CPU or memory than the team holds for them (the flavor's own, or
    the team's in the cluster: `selectors.cpu_memory_scope`; a Ray job's head and KubeRay's submitter count too:
    `pods`)."""
    errors = _beyond_cpu_or_memory(team=team, flavor=flavor, kind=kind, workers=workers,
                                   cpu_per_worker=cpu_per_worker, memory_gib_per_worker=memory_gib_per_worker)
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


def _beyond_cpu_or_memory(*, team, flavor, kind: str, workers: int, cpu_per_worker: int,
                          memory_gib_per_worker: int) -> dict[str, str]:
    if not kind or not cpu_per_worker or not memory_gib_per_worker:
        return {}
    totals = pods.pod_totals(kind=kind, workers=workers, cpu_per_worker=cpu_per_worker,
                             memory_gib_per_worker=memory_gib_per_worker)
    held = selectors.team_cpu_memory_quota(team=team, flavor=flavor, cluster=flavor.cluster)
    where = (f"with flavor {flavor.name}" if "flavor" in selectors.cpu_memory_scope(flavor=flavor,
                                                                                     cluster=flavor.cluster)
             else f"in {flavor.cluster.name}")
    errors = {}
    for field, what, asked, has, unit in (
            ("cpu_per_worker", "CPU", totals.cpu, held["cpu_cores"], " CPUs"),
            ("memory_gib_per_worker", "memory", totals.memory_gib, held["memory_gib"], " GiB")):
        if has and asked > has:
            errors[field] = (f"Its pods ask for {pods.number(asked)}{unit} in all ({totals.parts}), more than the "
                             f"team's {what} quota of {has}{unit} {where}: it could never start.")
    return errors


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
    # Every problem at once, per field, as the API reports them: not one group per submit.
    errors: dict[str, list] = {}

    def collect(check) -> None:
        try:
            check()
        except ValidationError as exc:
            for name, messages in exc.update_error_dict({}).items():
                errors.setdefault(name, []).extend(messages)

    if flavor.spot and not spot_allowed:
        errors["spot_allowed"] = [f"{flavor.name} is spot capacity: allow spot to use it. {placement.SPOT_WARNING}"]
    problem = placement.topology_problem(cluster=flavor.cluster, flavor=flavor, kind=kind, level=topology_level,
                                         mode=job.topology_mode)
    if problem:
        errors["topology_level"] = [problem]
    if kind == JobKind.RAY and not job.command:
        errors["command"] = ["A Ray job needs an entrypoint command."]
    collect(lambda: job.full_clean(exclude=["priority_tier"] if priority_tier is None else None))
    collect(lambda: job_check_feasible(team=team, flavor=flavor, tier=priority_tier, workers=workers,
                                       gpus_per_worker=gpus_per_worker, kind=kind, cpu_per_worker=cpu_per_worker,
                                       memory_gib_per_worker=memory_gib_per_worker))
    if errors:
        raise ValidationError(errors)
    job.save()
    audit_record(actor=actor, action="job.submit", obj=job, team=team,
                 after={"kind": kind, "workers": workers, "gpus_per_worker": gpus_per_worker,
                        "flavor": flavor.name}, source_ip=source_ip)
    _nudge(job)
    return job


def _nudge(job: Job) -> None:
    enqueue_on_commit(tasks.job_reconcile_task, job.pk)
    enqueue_on_commit(tasks.job_estimates_refresh_task, job.cluster_id)


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
    _request_cancel(job)
    audit_record(actor=actor, action="job.cancel", obj=job, team=job.team, source_ip=source_ip)
    job.refresh_from_db()
    return job


def job_progress_report(*, actor, job: Job, done: int, total: int, now: datetime | None = None) -> Job:
    """Keep the job's latest progress report (its training code's `done` of `total` steps, samples or epochs) and
    have the cluster's estimates recomputed with it. Only the team's admins and members report; a job that has
    ended takes no more reports. One conditional UPDATE, no row lock: reports are frequent and the latest wins.
    Not audited: a training loop may report every minute, and a report changes no one's rights or spending."""
    if team_role(user=actor, team=job.team) not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Only the team's admins and members can report a job's progress.")
    if not 0 <= done <= total or total < 1:
        raise ValidationError({"done": "Progress is done of total: 0 <= done <= total, and total at least 1."})
    reports = Case(When(progress_total=total, then=F("progress_reports") + 1), default=Value(1))
    updated = (Job.objects.filter(pk=job.pk).exclude(state__in=TERMINAL_STATES)
               .update(progress_done=done, progress_total=total, progress_at=now or timezone.now(),
                       progress_reports=reports))
    if not updated:
        raise Conflict(f"The job has already {job.get_state_display().lower()}; it takes no more progress reports.")
    # Debounced as the status sync's refreshes are: a busy cluster's reports within seconds share one refresh.
    transaction.on_commit(lambda cluster_id=job.cluster_id: tasks.job_estimates_refresh_soon(cluster_id))
    job.refresh_from_db(fields=["progress_done", "progress_total", "progress_at", "progress_reports"])
    return job


def _request_cancel(job: Job) -> None:
    job.cancel_requested_at = timezone.now()
    job.generation = F("generation") + 1
    job.next_attempt_at = timezone.now()
    job.save(update_fields=["cancel_requested_at", "generation", "next_attempt_at"])
    _nudge(job)


@transaction.atomic
def job_stop(*, job: Job, reason: str = "") -> None:
    """End a job for the portal (a workspace being suspended or deleted, the idle rule): its objects are deleted
    as on cancel, and `reason` becomes its final message; the caller checked who may and records it."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    if not job.terminal and not job.cancel_requested_at:
        Job.objects.filter(pk=job.pk).update(cancel_reason=reason[:300])
        job.cancel_reason = reason[:300]
        _request_cancel(job)


def job_resubmit(*, actor, job: Job, source_ip: str | None = None) -> Job:
    if not job.terminal and job.state != JobState.PREEMPTED:
        raise Conflict("Only a finished, failed, cancelled or preempted job can be resubmitted.")
    return _submit_again(actor=actor, job=job, source_ip=source_ip)


def _submit_again(*, actor, job: Job, source_ip: str | None = None) -> Job:
    return job_submit(actor=actor, team=job.team, flavor=job.flavor, kind=job.kind, name=job.name, image=job.image,
                      command=job.command, args=job.args, env=job.env, workers=job.workers,
                      gpus_per_worker=job.gpus_per_worker, cpu_per_worker=job.cpu_per_worker,
                      memory_gib_per_worker=job.memory_gib_per_worker, priority_tier=job.priority_tier,
                      max_runtime_minutes=job.max_runtime_minutes, notify=job.notify, resubmit_of=job,
                      spot_allowed=job.spot_allowed, topology_level=job.topology_level,
                      topology_mode=job.topology_mode, source_ip=source_ip)


@transaction.atomic
def job_suspend(*, job: Job, cause: str, reason: str) -> Job | None:
    """Stop a running job for a reason that will pass (`cause`: "the team's budget hold", said in full by `reason`)
    and submit it again at once, as its submitter, to wait behind it like any new job. Returns the new job; None
    when the job had ended already, or when it cannot be submitted again (its submitter left the team, its quota
    went): then it is only stopped, and its final message says so."""
    job = Job.objects.select_for_update().select_related("team", "cluster", "flavor", "priority_tier",
                                                        "submitted_by").get(pk=job.pk)
    if job.terminal or job.cancel_requested_at:
        return None
    try:
        with transaction.atomic():
            again = _submit_again(actor=job.submitted_by, job=job)
    except (PermissionDenied, Conflict, ValidationError) as exc:
        problem = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        job_stop(job=job, reason=_said(f"Suspended by {cause}; it could not be resubmitted ({problem}): resubmit it "
                                       f"when the hold lifts.", reason))
        return None
    job_stop(job=job, reason=_said(f"Suspended by {cause} and resubmitted as job {again.pk}, which starts when the "
                                   "hold lifts.", reason))
    return again


def _said(what: str, why: str, limit: int = 300) -> str:
    """What happened, then why, within the final message's length."""
    text = f"{what} {why}"
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _job_actual(client: kube.ClusterClient, job: Job) -> list[dict]:
    selector = f"{managed_selector()},{JOB_LABEL}={job.pk}"
    return [obj for api_version, kind in selectors.job_kinds(job.cluster.scheduler)
            for obj in client.list(api_version, kind, namespace=job.team.namespace, label_selector=selector)]


def job_reconcile(*, job_id: int) -> Outcome:
    """Create the job's objects if missing (never update them), or delete them once cancelled."""
    job = Job.objects.select_related("team", "cluster", "flavor", "priority_tier").filter(pk=job_id).first()
    if job is None or not job.cluster.active:
        return Outcome(statuses=[], writes=0)
    if job.state == JobState.FAILED and job.observed_generation == 0:
        return Outcome(statuses=job.objects_status, writes=0)  # refused for good (below): never created later
    generation = job.generation
    desired = selectors.job_desired(job=job)
    if desired and job.state == JobState.PENDING and job.observed_generation == 0:
        reason = holds.held(job)
        if reason:  # kept here until the hold lifts; billing's enforcement makes it due again then
            Job.objects.filter(pk=job.pk).update(next_attempt_at=None)
            sync.set_state(job, Observed(JobState.PENDING, reason), timezone.now())
            return Outcome(statuses=job.objects_status, writes=0)
    try:
        client = kube.client_for_cluster(job.cluster)
        actual = _job_actual(client, job)
    except kube.KubeError as exc:
        return record(job, generation, Outcome(statuses=job.objects_status, writes=0, error=exc))
    the_plan = plan(desired, actual, update=False)
    outcome = record(job, generation, converge(client, the_plan))
    if outcome.error is not None and not outcome.error.transient and job.state == JobState.PENDING:
        # Refused for good (an admission webhook, a validation): the job can never start, so it has failed, and
        # says why, rather than waiting as Pending with a Cancel button.
        sync.set_state(job, Observed(JobState.FAILED, f"{outcome.error}"), timezone.now())
    if outcome.error is None:
        if job.cancel_requested_at and job.state != JobState.CANCELLED:
            sync.set_state(job, Observed(JobState.CANCELLED, job.cancel_reason or "Cancelled by the user"),
                           timezone.now())
        elif job.state == JobState.PENDING and desired:
            sync.set_state(job, Observed(JobState.QUEUED), timezone.now())
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

