"""What would start a waiting job sooner: the same forecast asked about changed copies of it (fewer workers, fewer
GPUs per worker, another flavor or cluster the team holds quota of, a higher priority tier), each with its estimate
and the change that submits it; and, for a new job, the team's cluster where it would start first.

A change is a small dict of the job's fields (`workers`, `gpus_per_worker`, `flavor` by id, `priority` by tier
name); applying one submits the changed copy and cancels the waiting original (`job_resubmit_changed`).
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from tenants.choices import Role
from tenants.models import GpuFlavor, PriorityTier
from tenants.selectors import team_role

from . import estimates, selectors, services
from .choices import JobState
from .models import Job

WAITING = (JobState.PENDING, JobState.QUEUED, JobState.PREEMPTED)
CHANGE_FIELDS = {"workers", "gpus_per_worker", "flavor", "priority"}


def _changed_copy(job: Job, change: dict) -> Job:
    copy = Job(team=job.team, cluster=job.cluster, flavor=job.flavor, priority_tier=job.priority_tier, kind=job.kind,
               name=job.name, image=job.image, workers=job.workers, gpus_per_worker=job.gpus_per_worker,
               max_runtime_minutes=job.max_runtime_minutes, topology_level=job.topology_level,
               topology_mode=job.topology_mode)
    if "workers" in change:
        copy.workers = change["workers"]
    if "gpus_per_worker" in change:
        copy.gpus_per_worker = change["gpus_per_worker"]
    if "flavor" in change:
        copy.flavor = change["flavor"]
        copy.cluster = copy.flavor.cluster
        if copy.cluster != job.cluster:
            copy.topology_level, copy.topology_mode = "", ""  # levels are a cluster's own
    if "priority" in change:
        copy.priority_tier = change["priority"]
    return copy


def candidate_changes(job: Job) -> list[tuple[str, dict]]:
    """(what it says, the change) for each alternative worth asking about."""
    found = []
    if job.workers > 1:
        fewer = max(1, job.workers // 2)
        found.append((f"{fewer} worker{'s' if fewer != 1 else ''} instead of {job.workers}", {"workers": fewer}))
    if job.gpus_per_worker > 1:
        fewer = max(1, job.gpus_per_worker // 2)
        found.append((f"{fewer} GPU{'s' if fewer != 1 else ''} per worker instead of {job.gpus_per_worker}",
                      {"gpus_per_worker": fewer}))
    room = selectors.team_flavor_room(team=job.team)
    for flavor in selectors.submit_flavors(team=job.team).order_by("cluster__name", "name"):
        if flavor.pk == job.flavor_id or job.gpus_per_worker > flavor.gpus_per_node or flavor.spot:
            continue
        if job.total_gpus > room.get(flavor.pk, (0, 0))[0]:
            continue
        where = flavor.name if flavor.cluster_id == job.cluster_id else f"{flavor.name} in {flavor.cluster.name}"
        found.append((f"on {where}", {"flavor": flavor.pk}))
    for tier in PriorityTier.objects.filter(value__gt=job.priority_tier.value).order_by("value"):
        found.append((f"at priority {tier.name}", {"priority": tier.name}))
    return found


def _resolve(job: Job, change: dict) -> dict:
    """The change with the flavor and tier rows in place of their id and name; a ValidationError if it is not one
    of the alternatives this job has."""
    unknown = set(change) - CHANGE_FIELDS
    if unknown or not change:
        raise ValidationError({"change": f"Change one of {', '.join(sorted(CHANGE_FIELDS))}."})
    if change not in [c for _, c in candidate_changes(job)]:
        raise ValidationError({"change": "Not one of this job's alternatives."})
    return _rows(change)


def _rows(change: dict) -> dict:
    resolved = dict(change)
    if "flavor" in change:
        resolved["flavor"] = GpuFlavor.objects.select_related("cluster").get(pk=change["flavor"])
    if "priority" in change:
        resolved["priority"] = PriorityTier.objects.get(name=change["priority"])
    return resolved


def job_alternatives(*, job: Job, now: datetime | None = None) -> list[dict]:
    """The job's alternatives with their estimates, soonest first; empty unless the job waits."""
    if job.state not in WAITING:
        return []
    now = now or timezone.now()
    found = []
    for label, change in candidate_changes(job):
        copy = _changed_copy(job, _rows(change))
        copy.submitted_at = now
        try:
            document = _estimate_without(job, copy, now)
        except Exception:  # noqa: BLE001 - one cluster that cannot be read leaves the others' alternatives
            continue
        found.append({"label": label, "change": change, "estimate": document})
    current = estimates.likely_start(job.estimate or {})
    for item in found:
        likely = estimates.likely_start(item["estimate"])
        item["sooner"] = bool(likely and (current is None or likely < current))
    return sorted(found, key=lambda i: (estimates.likely_start(i["estimate"]) is None,
                                        estimates.likely_start(i["estimate"]) or now))


def _estimate_without(job: Job, copy: Job, now: datetime) -> dict:
    """The copy's estimate in its cluster as if it replaced the job (the original leaves its queue)."""
    cluster = copy.flavor.cluster
    world, jobs, works = estimates.cluster_inputs(cluster, now, [copy])
    works = [w for w in works if w.key != job.pk]
    found, outlook = estimates.cluster_estimates(cluster, world, works, now)
    by_key = {w.key: w for w in works}
    return estimates.document(found[estimates.PREVIEW_KEY], by_key, now.timestamp(), outlook=outlook)


@transaction.atomic
def job_resubmit_changed(*, actor, job: Job, change: dict, source_ip: str | None = None) -> Job:
    """Submit the job again with one of its alternatives' changes, and cancel the waiting original (so only those
    who may cancel it: its submitter or a team admin)."""
    role = team_role(user=actor, team=job.team)
    if role not in (Role.ADMIN, Role.MEMBER) or (role != Role.ADMIN and job.submitted_by_id != actor.pk):
        raise PermissionDenied("Only the submitter or a team admin can move this job.")
    if job.state not in WAITING or job.cancel_requested_at:
        raise ValidationError({"change": "Only a waiting job can be moved to an alternative."})
    copy = _changed_copy(job, _resolve(job, change))
    new = services.job_submit(actor=actor, team=job.team, flavor=copy.flavor, kind=job.kind, name=job.name,
                              image=job.image, command=job.command, args=job.args, env=job.env,
                              workers=copy.workers, gpus_per_worker=copy.gpus_per_worker,
                              cpu_per_worker=job.cpu_per_worker, memory_gib_per_worker=job.memory_gib_per_worker,
                              priority_tier=copy.priority_tier, max_runtime_minutes=job.max_runtime_minutes,
                              notify=job.notify, resubmit_of=job, spot_allowed=job.spot_allowed,
                              topology_level=copy.topology_level, topology_mode=copy.topology_mode,
                              source_ip=source_ip)
    services.job_cancel(actor=actor, job=job, source_ip=source_ip)
    return new


def earliest_flavor(*, team, flavor: GpuFlavor, kind: str, image: str, workers: int, gpus_per_worker: int, tier,
                    max_runtime_minutes: int, now: datetime | None = None) -> GpuFlavor:
    """Of the team's flavors like `flavor` (same name, else same resource and GPU model) in any of its clusters,
    the one where the job would likely start first (the given one on a tie)."""
    now = now or timezone.now()
    tier = tier or PriorityTier.objects.filter(is_default=True).first()
    held = selectors.submit_flavors(team=team)
    alike = [f for f in held if f.name == flavor.name or (f.resource_name == flavor.resource_name
                                                           and f.gpu_model == flavor.gpu_model)]
    room = selectors.team_flavor_room(team=team)
    best, best_start = flavor, None
    for candidate in sorted(alike, key=lambda f: (f.pk != flavor.pk, f.pk)):
        if workers * gpus_per_worker > room.get(candidate.pk, (0, 0))[0] or gpus_per_worker > candidate.gpus_per_node:
            continue
        document = estimates.preview(team=team, flavor=candidate, kind=kind, image=image, workers=workers,
                                     gpus_per_worker=gpus_per_worker, tier=tier,
                                     max_runtime_minutes=max_runtime_minutes, now=now)
        start = estimates.likely_start(document)
        if start is not None and (best_start is None or start < best_start):
            best, best_start = candidate, start
    return best
