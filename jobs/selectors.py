"""Reads for jobs, scoped to the user's teams: the job list (the page's queryset and the API's keyset page), one
job, its pods and why it waits; the desired objects of a job; which jobs are due for reconcile; what the submit form
offers (flavors the team holds quota of, its saved templates)."""

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.models import F, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from backends import backend_for
from backends.kueue_manifests import LOCAL_QUEUE
from backends.observe import PODS_READY_TIMEOUT_MARKER
from backends.specs import TeamQuotaSpec
from portal import kube, sql
from portal.upstream import RAY_API, VOLCANO_TOPOLOGY_API
from quotas.models import Quota
from quotas.selectors import team_quotas
from tenants.choices import Sharing
from tenants.manifests import priority_class_name
from tenants.models import GpuFlavor
from tenants.selectors import visible_team_ids

from . import hypernodes, placement, pods
from .choices import TERMINAL_STATES, JobState, Placement, WaitReason
from .claims import CLAIM_NOT_CREATED_MARKER, RESOURCE_API
from .filters import JobFilter, filter_lookup
from .manifests import JobSpec, job_manifests
from .models import Job, JobTemplate
from .waits import wait_reason


def job_list(*, user, team=None, filters: dict | None = None) -> QuerySet[Job]:
    """The jobs the user may see, newest first; `filters` are JobFilter values by name (JobFilter.values())."""
    jobs = Job.objects.all()
    team_ids = visible_team_ids(user=user)
    if team_ids is not None:
        jobs = jobs.filter(team_id__in=team_ids)
    if team is not None:
        jobs = jobs.filter(team=team)
    for name, value in (filters or {}).items():
        field, lookup = filter_lookup(name)
        jobs = jobs.filter(**{f"{field}__{lookup}": value})
    return (jobs.select_related("team", "cluster", "flavor", "priority_tier", "submitted_by")
            .order_by("-submitted_at", "-id"))


# The job list page (the API's hottest read): its columns, as .values() would name them. The joins, the columns'
# SQL and the filters' conditions all come from the models' metadata (tables, columns, foreign keys).
PAGE_KEYS = (
    "id", "name", "kind", "state", "state_message", "image", "workers", "gpus_per_worker", "team__slug",
    "cluster__name", "flavor__name", "priority_tier__name", "submitted_by__username", "submitted_at", "admitted_at",
    "started_at", "finished_at", "estimate",
)
PAGE_RELATIONS = ("team", "cluster", "flavor", "priority_tier", "submitted_by")
JOB_ALIAS = "j"
# SQL for the lookups JobFilter uses; a filter with any other lookup fails when the page's query is first built.
LOOKUP_OPERATORS = {"exact": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


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
    page = _page_query()
    where, params = ["1 = 1"], []
    if team_ids is not None:
        where.append(f"{page.team_id} IN ({sql.placeholders(team_ids)})")
        params += team_ids
    for name, value in filters.items():
        where.append(page.conditions[name])
        params.append(_sql_value(value))
    if position is not None:
        where.append(f"({page.submitted_at}, {page.id}) {'>' if reverse else '<'} (%s, %s)")
        params += [_sql_value(position[0]), position[1]]
    order = "ASC" if reverse else "DESC"
    query = (f"{page.select} WHERE {' AND '.join(where)} "
             f"ORDER BY {page.submitted_at} {order}, {page.id} {order} LIMIT %s")
    rows = sql.fetch(query, [*params, limit], page.fields)
    return [dict(zip(PAGE_KEYS, row, strict=True)) for row in rows]


def _sql_value(value):
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value


def _field_of(path: str):
    """The model field a lookup path from Job ends on (team__slug: Team.slug), and the path's relation."""
    relation, _, name = path.rpartition("__")
    model = Job._meta.get_field(relation).related_model if relation else Job
    return model._meta.get_field(name), relation


def _column(path: str) -> str:
    field, relation = _field_of(path)
    if relation and relation not in PAGE_RELATIONS:
        raise ImproperlyConfigured(f"The job page does not join {relation!r}: add it to PAGE_RELATIONS.")
    return f'{connection.ops.quote_name(relation or JOB_ALIAS)}.{connection.ops.quote_name(field.column)}'


@dataclass(frozen=True)
class _PageQuery:
    select: str  # SELECT <PAGE_KEYS' columns> FROM <Job's table> JOIN <each relation's table>
    fields: tuple  # each column's model field (how sql.fetch converts its values)
    conditions: dict  # JobFilter's name → "<column> <operator> %s"
    team_id: str
    submitted_at: str
    id: str


@functools.cache
def _page_query() -> _PageQuery:
    quote = connection.ops.quote_name
    joins = [f"FROM {quote(Job._meta.db_table)} {quote(JOB_ALIAS)}"]
    for relation in PAGE_RELATIONS:  # every one is a required foreign key, so an inner join keeps every job
        foreign_key = Job._meta.get_field(relation)
        target = foreign_key.related_model._meta
        joins.append(f"JOIN {quote(target.db_table)} {quote(relation)} ON {quote(relation)}.{quote(target.pk.column)}"
                     f" = {quote(JOB_ALIAS)}.{quote(foreign_key.column)}")
    conditions = {}
    for name in JobFilter.base_filters:
        path, lookup = filter_lookup(name)
        conditions[name] = f"{_column(path)} {LOOKUP_OPERATORS[lookup]} %s"
    return _PageQuery(
        select=f"SELECT {', '.join(_column(key) for key in PAGE_KEYS)} {' '.join(joins)}",
        fields=tuple(_field_of(key)[0] for key in PAGE_KEYS), conditions=conditions,
        team_id=f"{quote(JOB_ALIAS)}.{quote(Job._meta.get_field('team').column)}",
        submitted_at=_column("submitted_at"), id=_column("id"))


def jobs_due(*, limit: int = 500) -> list[int]:
    """Ids of the jobs whose objects must be created or deleted now: a lost nudge, or a retry whose time came."""
    return list(Job.objects.filter(next_attempt_at__lte=timezone.now()).values_list("pk", flat=True)[:limit])


def job_get(*, user, pk: int) -> Job:
    job = job_list(user=user).filter(pk=pk).first()
    if job is None:
        raise Http404("No such job")
    return job


def job_pods(*, job: Job, tail_lines: int = 50) -> list[dict]:
    """The job's pods and the last lines of their logs, read live (KubeError when the cluster can't say)."""
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


# What a kind adds to its jobs' specs, registered by the app that owns the kind (a workspace's volume and port):
# kind → function of the job row returning JobSpec fields.
SPEC_EXTRAS: dict[str, Callable[[Job], dict]] = {}


def job_spec(job: Job) -> JobSpec:
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
        gpu_resource=job.flavor.scheduled_resource(job.cluster.mig_strategy),
        cpu_per_worker=job.cpu_per_worker,
        memory_gib_per_worker=job.memory_gib_per_worker,
        priority_class=priority_class_name(job.priority_tier.name),
        local_queue=LOCAL_QUEUE,
        volcano_queue=queue,
        max_runtime_seconds=job.max_runtime_minutes * 60,
        **_placement_fields(job),
        device_class=job.flavor.device_class if job.flavor.sharing == Sharing.DRA else "",
        device_selector=job.flavor.device_selector,
        **(SPEC_EXTRAS[job.kind](job) if job.kind in SPEC_EXTRAS else {}),
    )


def _placement_fields(job: Job) -> dict:
    """Node labels and tolerations of the job's flavor; with spot allowed, only the labels it shares with the
    cluster's spot flavors of its resource, and their taints tolerated; its topology request."""
    strategy, flavor, cluster = job.cluster.mig_strategy, job.flavor, job.cluster
    fields = {"node_labels": flavor.scheduled_node_labels(strategy), "tolerations": list(flavor.tolerations),
              **placement.placement_fields(cluster=cluster, flavor=flavor, level=job.topology_level,
                                           mode=job.topology_mode)}
    if job.spot_allowed:
        siblings = placement.spot_siblings(flavor, list(cluster.flavors.all()), strategy)
        if siblings:
            fields["node_labels"] = placement.shared_labels(flavor, siblings, strategy)
            fields["tolerations"] += placement.tolerations_for([t for s in siblings for t in s.node_taints])
            if backend_for(cluster).prefers_reserved and not flavor.spot:
                fields["preferred_node_labels"] = flavor.scheduled_node_labels(strategy)
    return fields


def job_desired(*, job: Job) -> list[dict]:
    """The job's objects while it should exist; nothing once cancelled (so reconcile deletes them)."""
    if job.cancel_requested_at or job.state == JobState.CANCELLED:
        return []
    return job_manifests(job_spec(job))


def job_kinds(scheduler: str, *, claims: bool = True) -> list[tuple[str, str]]:
    """The kinds a job's objects are; `claims=False` leaves out the ResourceClaimTemplate, which has no status."""
    templates = [(RESOURCE_API, "ResourceClaimTemplate")] if claims else []
    return [*templates, *backend_for(scheduler).job_kinds, (RAY_API, "RayJob")]


# What the status sync reads of each active job: thousands of rows per sync, so not the JSON spec fields.
SYNC_FIELDS = ("id", "name", "kept_object_name", "kind", "state", "state_message", "submitted_at", "admitted_at",
               "started_at", "finished_at", "cancel_requested_at", "cancel_reason", "notify", "submitted_by_id",
               "team__slug", "cluster", "placement", "topology_level")


def active_jobs(*, cluster) -> QuerySet[Job]:
    """The cluster's jobs that have objects on it (see `of_cluster` for their `cluster`)."""
    return (Job.objects.filter(cluster=cluster).exclude(state__in=TERMINAL_STATES).exclude(state=JobState.PENDING)
            .select_related("team").only(*SYNC_FIELDS))


def of_cluster(jobs, cluster) -> list[Job]:
    """`jobs` read, each given `cluster` itself: one row for all, rather than a copy of it joined into every job."""
    found = list(jobs)
    for job in found:
        job.cluster = cluster
    return found


def team_flavor_room(*, team) -> dict[int, tuple[int, int]]:
    """Per flavor the team holds: (its limit, the GPUs it can start a job on now).

    Its guaranteed units are its own; burst is borrowed, so only as far as the flavor has units no job holds. The
    limit alone ("24 free") promised what a job then waited for."""
    quotas = list(Quota.objects.filter(team=team).select_related("flavor"))
    held = defaultdict(int)  # (team id, flavor id) → GPUs its admitted and running jobs hold
    for team_id, flavor_id, gpus in (Job.objects.filter(flavor__in=[q.flavor_id for q in quotas],
                                                        state__in=[JobState.ADMITTED, JobState.RUNNING])
                                     .values("team_id", "flavor_id").annotate(gpus=Sum(F("workers") *
                                                                                      F("gpus_per_worker")))
                                     .values_list("team_id", "flavor_id", "gpus")):
        held[(team_id, flavor_id)] += gpus or 0
    room = {}
    for quota in quotas:
        mine = held[(team.pk, quota.flavor_id)]
        idle = max(0, quota.flavor.capacity - sum(g for (_, f), g in held.items() if f == quota.flavor_id))
        own = max(0, quota.guaranteed - mine)
        # Its own unheld guarantee is free even when borrowed by others (the scheduler reclaims it).
        room[quota.flavor_id] = (quota.limit, max(0, min(quota.limit - mine, max(own, idle))))
    return room


def gpus_held_by_flavor(flavor_ids) -> dict[tuple[int, int], int]:
    """{(team id, flavor id): GPUs its admitted and running jobs hold} for these flavors, in one query."""
    return {(team_id, flavor_id): gpus or 0 for team_id, flavor_id, gpus in
            Job.objects.filter(flavor__in=flavor_ids, state__in=[JobState.ADMITTED, JobState.RUNNING])
            .values("team_id", "flavor_id").annotate(gpus=Sum(F("workers") * F("gpus_per_worker")))
            .values_list("team_id", "flavor_id", "gpus")}


def submit_flavors(*, team) -> QuerySet[GpuFlavor]:
    """The flavors the team may submit jobs to: those it holds quota of."""
    held = [q.flavor_id for q in team_quotas(team=team) if q.limit > 0]
    return GpuFlavor.objects.filter(pk__in=held).select_related("cluster")


def spot_flavor_names(*, cluster) -> set[str]:
    return set(cluster.flavors.filter(spot=True).values_list("name", flat=True))


def job_templates(*, team, kind: str | None = None) -> QuerySet[JobTemplate]:
    templates = JobTemplate.objects.filter(team=team)
    return templates.filter(kind=kind) if kind else templates


def job_template_get(*, team, pk: int) -> JobTemplate:
    template = job_templates(team=team).filter(pk=pk).first()
    if template is None:
        raise Http404("No such template")
    return template


def team_flavor_quota(*, team, flavor) -> Quota | None:
    return Quota.objects.filter(team=team, flavor=flavor).first()


def cpu_memory_scope(*, flavor, cluster) -> dict:
    """Whose CPU and memory quota a job on `flavor` (in `cluster`) draws on, as its scheduler holds it: the
    flavor's own (Kueue), or the team's pool in the cluster (Volcano). A filter for Job rows."""
    return {"flavor": flavor} if backend_for(cluster).cpu_memory_per_flavor else {"cluster": cluster}


def team_cpu_memory_quota(*, team, flavor, cluster) -> dict[str, int]:
    """The team's CPU cores and memory GiB a job on `flavor` may use (`cpu_memory_scope`)."""
    scope = cpu_memory_scope(flavor=flavor, cluster=cluster)
    rows = Quota.objects.filter(team=team, **({"flavor": flavor} if "flavor" in scope
                                              else {"flavor__cluster": cluster}))
    totals = rows.aggregate(cpu_cores=Sum("cpu_cores"), memory_gib=Sum("memory_gib"))
    return {name: value or 0 for name, value in totals.items()}


@dataclass
class QueuedTeam:
    """One team's queue in a cluster: its waiting jobs in admission order (position 1 starts first)."""

    team: object
    jobs: list  # Job rows, each with `position`


def cluster_queue(*, user, cluster, team=None) -> list[QueuedTeam]:
    """The waiting jobs of the cluster the user may see, per team queue, in the order the scheduler admits them:
    higher priority first, then the earlier submission (the order of Kueue's ClusterQueue heap, its queueOrderingFunc
    under BestEffortFIFO and StrictFIFO; Volcano's priority plugin orders a Queue's jobs alike). One query."""
    jobs = job_list(user=user, team=team).filter(cluster=cluster, state__in=[JobState.PENDING, JobState.QUEUED])
    queues: dict[int, QueuedTeam] = {}
    for job in jobs.order_by("team__slug", "-priority_tier__value", "submitted_at", "id"):
        queue = queues.setdefault(job.team_id, QueuedTeam(team=job.team, jobs=[]))
        job.position = len(queue.jobs) + 1
        queue.jobs.append(job)
    return list(queues.values())


def jobs_ahead(*, job: Job) -> QuerySet[Job]:
    """Jobs of the same team queue that were waiting before this one."""
    return (Job.objects.filter(team=job.team, cluster=job.cluster, state=JobState.QUEUED,
                               submitted_at__lt=job.submitted_at)
            .select_related("submitted_by").order_by("-priority_tier__value", "submitted_at"))


HYPERNODE_TTL = 60.0  # seconds a cluster's HyperNodes (and, where members are chosen by labels, its Nodes) are reused
_hypernodes: dict[int, tuple[float, list[dict], dict[str, dict] | None]] = {}


def volcano_topology(*, cluster, nodes: set[str]) -> tuple[list[dict], dict[str, dict | None]]:
    """A Volcano cluster's HyperNodes, and `nodes` with their labels where some HyperNode chooses nodes by label
    (None otherwise: exact names and patterns need none). Read once a minute at most, or again after a few seconds
    when one of `nodes` is in no HyperNode yet (a node just added). [] where the cluster serves no HyperNodes."""
    read_at, found, labels = _hypernodes.get(cluster.pk, (0.0, [], None))
    age = time.monotonic() - read_at
    if age >= HYPERNODE_TTL or (age >= 5 and not nodes <= _held(found, nodes, labels)):
        client = kube.client_for_cluster(cluster)
        found = client.list(VOLCANO_TOPOLOGY_API, "HyperNode")  # none: no CRD (Volcano before v1.12)
        labels = ({n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in client.list("v1", "Node")}
                  if hypernodes.needs_node_labels(found) else None)
        _hypernodes[cluster.pk] = (time.monotonic(), found, labels)
    return found, _with_labels(nodes, labels)


def _with_labels(nodes: set[str], labels: dict | None) -> dict[str, dict | None]:
    return {name: None if labels is None else labels.get(name) for name in nodes}


def _held(found: list[dict], nodes: set[str], labels: dict | None) -> set[str]:
    return {name for _, held in hypernodes.held_nodes(found, _with_labels(nodes, labels)).values() for name in held}


def why_waiting(*, job: Job) -> str:
    """One sentence from the scheduler's own words plus the team's numbers."""
    if job.state not in (JobState.QUEUED, JobState.PENDING):
        return ""
    if wait_reason(job.state, job.state_message) == WaitReason.BUDGET:  # the team's budget, not its quota
        where = "the portal keeps it until the hold lifts" if job.state == JobState.PENDING else \
            "its scheduler holds it before admission"
        return f"The team's budget holds this job ({where}). {job.state_message}"
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
    if 'topology "' in job.state_message:  # Kueue's TAS words: the domain, not the quota, has no room
        sentence = (f"Placement, not quota, is what blocks: no {job.topology_level or 'topology domain'} has room "
                    f"for all {job.workers} workers together ({held}, {in_use} in use)")
    elif PODS_READY_TIMEOUT_MARKER in job.state_message:  # Kueue's waitForPodsReady: admitted, but never started
        sentence = (f"Its pods did not all start in time after Kueue admitted it (waitForPodsReady), so Kueue "
                    f"released its quota and queues it again after a backoff: team quota {held}, {in_use} in use by "
                    f"{count} job{'' if count == 1 else 's'}")
    elif CLAIM_NOT_CREATED_MARKER in job.state_message:  # the team's ResourceQuota refused a worker's claim
        sentence += ("; the team's ResourceQuota refuses its workers' device claims until devices are free (the "
                     "scheduler's queue does not count them)")
    elif "tasks in gang unschedulable" in job.state_message:  # Volcano's gang words: past enqueue, so not quota
        within = (f" within one {job.topology_level} (hard network topology)"
                  if job.topology_level and job.topology_mode == Placement.REQUIRED else "")
        gang = "it" if job.workers == 1 else f"all {job.workers} workers together"
        sentence = (f"Placement, not quota, is what blocks: Volcano let the job into its queue ({held}, {in_use} "
                    f"in use), but its nodes have no room for {gang}{within}")
    elif resource := pods.short_of(job.state_message):  # the team's CPU or memory quota, not its GPUs
        sentence = _short_of_sentence(job, resource)
    return f"{sentence}. Scheduler: {job.state_message}" if job.state_message else sentence + "."


def _short_of_sentence(job: Job, resource: str) -> str:
    """The job waits for the team's CPU or memory quota (its flavor's, or the team's pool in the cluster:
    `cpu_memory_scope`), not for GPUs: what all its pods ask for, a Ray job's head and KubeRay's submitter included
    (`pods`), against what the team holds and what its started jobs drawing on the same quota take."""
    def size(one) -> pods.PodTotals:
        return pods.pod_totals(kind=one.kind, workers=one.workers, cpu_per_worker=one.cpu_per_worker,
                               memory_gib_per_worker=one.memory_gib_per_worker)

    scope = cpu_memory_scope(flavor=job.flavor, cluster=job.cluster)
    started = [size(one) for one in Job.objects.filter(
        team=job.team, state__in=[JobState.ADMITTED, JobState.RUNNING], **scope).only(
        "kind", "workers", "cpu_per_worker", "memory_gib_per_worker")]
    totals, held = size(job), team_cpu_memory_quota(team=job.team, flavor=job.flavor, cluster=job.cluster)
    where = f"with flavor {job.flavor.name}" if "flavor" in scope else "in this cluster"
    if resource == "cpu":
        what, unit, asked, holds = "CPU", " CPUs", totals.cpu, held["cpu_cores"]
        in_use = sum((one.cpu for one in started), Decimal(0))
    else:
        what, unit, asked, holds = "memory", " GiB", totals.memory_gib, held["memory_gib"]
        in_use = sum((one.memory_gib for one in started), Decimal(0))
    jobs = f"{len(started)} job{'' if len(started) == 1 else 's'}"
    return (f"Waiting for {what}, not GPUs: its pods ask for {pods.number(asked)}{unit} in all ({totals.parts}); "
            f"the team's {what} quota {where} is {holds}{unit}, {pods.number(in_use)} in use by {jobs}")
