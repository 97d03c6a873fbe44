"""Reads for jobs, scoped to the user's teams, and the desired objects of a job."""

import functools
from datetime import datetime

from django.db import connection
from django.db.models import F, QuerySet, Sum
from django.http import Http404

from portal import sql
from quotas.models import Quota
from tenants.choices import Scheduler
from tenants.manifests import priority_class_name
from tenants.selectors import visible_team_ids

from .choices import TERMINAL_STATES, JobState
from .manifests import JobSpec, job_manifests
from .models import Job


def job_list(*, user, team=None, state: str = "", kind: str = "", username: str = "",
             flavor: str = "") -> QuerySet[Job]:
    jobs = Job.objects.all()
    team_ids = visible_team_ids(user=user)
    if team_ids is not None:
        jobs = jobs.filter(team_id__in=team_ids)
    if team is not None:
        jobs = jobs.filter(team=team)
    if state:
        jobs = jobs.filter(state=state)
    if kind:
        jobs = jobs.filter(kind=kind)
    if username:
        jobs = jobs.filter(submitted_by__username__iexact=username)
    if flavor:
        jobs = jobs.filter(flavor__name__iexact=flavor)
    return (jobs.select_related("team", "cluster", "flavor", "priority_tier", "submitted_by")
            .order_by("-submitted_at", "-id"))


# The job list page (the API's hottest read): per column, the key of a row (as .values() names that lookup), its
# SQL over the page's joins, and its model field (how the value is converted).
PAGE_FROM = """FROM jobs_job j
JOIN tenants_team t ON t.id = j.team_id
JOIN tenants_cluster c ON c.id = j.cluster_id
JOIN tenants_gpuflavor f ON f.id = j.flavor_id
JOIN tenants_prioritytier p ON p.id = j.priority_tier_id
JOIN auth_user u ON u.id = j.submitted_by_id"""
PAGE_COLUMNS = (
    ("id", "j.id"), ("name", "j.name"), ("kind", "j.kind"), ("state", "j.state"),
    ("state_message", "j.state_message"), ("image", "j.image"), ("workers", "j.workers"),
    ("gpus_per_worker", "j.gpus_per_worker"), ("team__slug", "t.slug"), ("cluster__name", "c.name"),
    ("flavor__name", "f.name"), ("priority_tier__name", "p.name"), ("submitted_by__username", "u.username"),
    ("submitted_at", "j.submitted_at"), ("admitted_at", "j.admitted_at"), ("started_at", "j.started_at"),
    ("finished_at", "j.finished_at"),
)
PAGE_KEYS = tuple(key for key, _ in PAGE_COLUMNS)
# The API's filters (jobs.api.JobFilter's names) as conditions on the page's joins.
PAGE_FILTERS = {
    "team": "t.slug = %s", "state": "j.state = %s", "kind": "j.kind = %s", "user": "u.username = %s",
    "flavor": "f.name = %s", "cluster": "c.name = %s",
    "submitted_after": "j.submitted_at >= %s", "submitted_before": "j.submitted_at < %s",
}


def job_page(*, user, filters: dict, position: tuple[datetime, int] | None = None, reverse: bool = False,
             limit: int = 50) -> list[dict]:
    """Up to `limit` rows (PAGE_KEYS) of the jobs the user may see that match `filters`, newest first (submitted_at,
    then id): those after `position` (a row's submitted_at and id), or with `reverse` those before it, nearest
    first.

    The same jobs, in the same order, as job_list with the same filters, read with one hand-written SELECT: the
    ORM's query building costs more than this query (see portal/sql.py), and the keyset walks the (team,
    submitted_at, id) index straight to the page, however deep."""
    team_ids = visible_team_ids(user=user)
    if team_ids == []:
        return []
    where, params = ["1 = 1"], []
    if team_ids is not None:
        where.append(f"j.team_id IN ({sql.placeholders(team_ids)})")
        params += team_ids
    for name, value in filters.items():
        where.append(PAGE_FILTERS[name])
        params.append(_sql_value(value))
    if position is not None:
        where.append(f"(j.submitted_at, j.id) {'>' if reverse else '<'} (%s, %s)")
        params += [_sql_value(position[0]), position[1]]
    order = "ASC" if reverse else "DESC"
    query = (f"SELECT {', '.join(column for _, column in PAGE_COLUMNS)} {PAGE_FROM} WHERE {' AND '.join(where)} "
             f"ORDER BY j.submitted_at {order}, j.id {order} LIMIT %s")
    rows = sql.fetch(query, [*params, limit], _page_fields())
    return [dict(zip(PAGE_KEYS, row, strict=True)) for row in rows]


def _sql_value(value):
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value


@functools.cache
def _page_fields() -> tuple:
    """Each column's model field, found by following its lookup from Job (team__slug: Team.slug)."""
    fields = []
    for key in PAGE_KEYS:
        relation, _, name = key.rpartition("__")
        model = Job._meta.get_field(relation).related_model if relation else Job
        fields.append(model._meta.get_field(name))
    return tuple(fields)


def job_get(*, user, pk: int) -> Job:
    job = job_list(user=user).filter(pk=pk).first()
    if job is None:
        raise Http404("No such job")
    return job


def job_pods(*, job: Job, tail_lines: int = 50) -> list[dict]:
    """The job's pods and the last lines of their logs, read live (KubeError when the cluster can't say)."""
    from portal import kube

    client = kube.client_for_cluster(job.cluster)
    pods = client.list("v1", "Pod", namespace=job.team.namespace, label_selector=f"gpu-portal.io/job={job.pk}")
    result = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"])[:16]:
        name = pod["metadata"]["name"]
        try:
            log = client.pod_log(job.team.namespace, name, tail_lines=tail_lines)
        except kube.KubeError as exc:
            log = f"(log unavailable: {exc})"
        result.append({"name": name, "phase": (pod.get("status") or {}).get("phase", "Unknown"), "log": log})
    return result


def job_spec(job: Job) -> JobSpec:
    from quotas.manifests import LOCAL_QUEUE, TeamQuotaSpec

    queue = TeamQuotaSpec(slug=job.team.slug, namespace=job.team.namespace, quotas=(), cluster_flavors=()).queue_name
    return JobSpec(
        name=job.object_name,
        namespace=job.team.namespace,
        team_slug=job.team.slug,
        job_id=job.pk,
        kind=job.kind,
        scheduler=job.cluster.scheduler,
        image=job.image,
        command=tuple(job.command),
        args=tuple(job.args),
        env=tuple(sorted(job.env.items())),
        workers=job.workers,
        gpus_per_worker=job.gpus_per_worker,
        gpu_resource=job.flavor.resource_name,
        cpu_per_worker=job.cpu_per_worker,
        memory_gib_per_worker=job.memory_gib_per_worker,
        priority_class=priority_class_name(job.priority_tier.name),
        local_queue=LOCAL_QUEUE,
        volcano_queue=queue,
        max_runtime_seconds=job.max_runtime_minutes * 60,
        node_labels=job.flavor.node_labels,
        tolerations=job.flavor.tolerations,
    )


def job_desired(*, job: Job) -> list[dict]:
    """The job's objects while it should exist; nothing once cancelled (so reconcile deletes them)."""
    if job.cancel_requested_at or job.state == JobState.CANCELLED:
        return []
    return job_manifests(job_spec(job))


def job_kinds(scheduler: str) -> list[tuple[str, str]]:
    if scheduler == Scheduler.KUEUE:
        return [("v1", "Service"), ("batch/v1", "Job"), ("ray.io/v1", "RayJob")]
    return [("batch.volcano.sh/v1alpha1", "Job"), ("ray.io/v1", "RayJob")]


# What the status sync reads of each active job: thousands of rows per sync, so not the JSON spec fields.
SYNC_FIELDS = ("id", "name", "kind", "state", "state_message", "admitted_at", "started_at", "finished_at",
               "cancel_requested_at", "notify", "submitted_by_id", "team__slug", "cluster__scheduler")


def active_jobs(*, cluster) -> QuerySet[Job]:
    return (Job.objects.filter(cluster=cluster).exclude(state__in=TERMINAL_STATES).exclude(state=JobState.PENDING)
            .select_related("team", "cluster").only(*SYNC_FIELDS))


def team_flavor_room(*, team) -> dict[int, tuple[int, int]]:
    """Per flavor the team holds: (its limit, the GPUs its admitted and running jobs hold now)."""
    held = dict(Job.objects.filter(team=team, state__in=[JobState.ADMITTED, JobState.RUNNING])
                .values("flavor_id").annotate(gpus=Sum(F("workers") * F("gpus_per_worker")))
                .values_list("flavor_id", "gpus"))
    return {q.flavor_id: (q.limit, held.get(q.flavor_id) or 0) for q in Quota.objects.filter(team=team)}


def team_flavor_quota(*, team, flavor) -> Quota | None:
    return Quota.objects.filter(team=team, flavor=flavor).first()


def jobs_ahead(*, job: Job) -> QuerySet[Job]:
    """Jobs of the same team queue that were waiting before this one."""
    return (Job.objects.filter(team=job.team, cluster=job.cluster, state=JobState.QUEUED,
                               submitted_at__lt=job.submitted_at)
            .select_related("submitted_by").order_by("-priority_tier__value", "submitted_at"))


def why_waiting(*, job: Job) -> str:
    """One sentence from the scheduler's own words plus the team's numbers."""
    if job.state not in (JobState.QUEUED, JobState.PENDING):
        return ""
    if job.state == JobState.PENDING:
        return job.sync_message or "Not yet submitted to the cluster."
    quota = team_flavor_quota(team=job.team, flavor=job.flavor)
    running = (Job.objects.filter(team=job.team, flavor=job.flavor,
                                  state__in=[JobState.ADMITTED, JobState.RUNNING]))
    in_use = sum(j.workers * j.gpus_per_worker for j in running.only("workers", "gpus_per_worker"))
    count = running.count()
    held = f"{quota.guaranteed} guaranteed + {quota.burst} burst" if quota else "no quota"
    sentence = (f"Waiting for {job.total_gpus} {job.flavor.resource_name} of flavor {job.flavor.name}: "
                f"team quota {held}, {in_use} in use by {count} job{'' if count == 1 else 's'}")
    return f"{sentence}. Scheduler: {job.state_message}" if job.state_message else sentence + "."
