"""Start and end estimates of a cluster's jobs: the forecast's inputs read from the rows (quotas, the jobs running
and waiting, the run times of the teams' comparable jobs), its results turned into what the rows keep (ISO 8601
UTC times, the facts they rest on, one sentence), and the refresh that writes them when the cluster changed.

The submit form's preview and "what would start it sooner" ask the same forecast about a job not yet submitted.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from backends import arrivals, backend_for, forecast
from portal import kube
from quotas.desired import parent_name
from quotas.models import Quota
from tenants.choices import PreemptionPolicy, TeamState
from tenants.models import Cluster, Team

from . import inventory, nodes, runtimes
from .choices import TERMINAL_STATES, JobState, Placement
from .models import Job

log = logging.getLogger(__name__)

HISTORY_DAYS = 30
HISTORY_RUNS = 50  # the latest comparable runs kept per team, image and kind
RUNNING = (JobState.ADMITTED, JobState.RUNNING)
PREVIEW_KEY = 0  # the key of a job not yet submitted, in a forecast that asks about it


# --- what the forecast is fed ---------------------------------------------------------------------------------------


def cluster_world(cluster: Cluster) -> forecast.World:
    """The cluster's queues as the portal configures them, built by its backend from what each team holds."""
    quotas = (Quota.objects.filter(flavor__cluster=cluster).select_related("team__parent", "flavor")
              .order_by("team__slug", "flavor__name"))
    holdings = []
    for quota in quotas:
        team = quota.team
        parent = parent_name(team, cluster)
        holdings.append(forecast.Holding(
            team=team.slug, parent=parent, department=parent if team.parent_id else "", flavor=quota.flavor.name,
            guaranteed=quota.guaranteed, burst=quota.burst, held=team.state != TeamState.ACTIVE,
            weight=team.fair_share_weight, department_weight=team.parent.fair_share_weight if team.parent_id else 1))
    flavors = list(cluster.flavors.all())
    return backend_for(cluster).estimate_world(
        holdings, cohort=cluster.cohort, capacity={f.name: f.capacity for f in flavors},
        resources={f.name: f.scheduled_resource(cluster.mig_strategy) for f in flavors})


def history(*, cluster: Cluster, keys: set[tuple[int, str, str]], now: datetime) -> dict[tuple, list[dict]]:
    """(team id, image, kind) → its latest successful runs in the cluster: run seconds, flavor, GPUs."""
    if not keys:
        return {}
    rows = (Job.objects.filter(cluster=cluster, state=JobState.SUCCEEDED, team_id__in={k[0] for k in keys},
                               image__in={k[1] for k in keys}, started_at__isnull=False, finished_at__isnull=False,
                               finished_at__gte=now - timedelta(days=HISTORY_DAYS))
            .order_by("-finished_at").values_list("team_id", "image", "kind", "flavor_id", "workers",
                                                  "gpus_per_worker", "started_at", "finished_at"))
    found: dict[tuple, list[dict]] = defaultdict(list)
    for team_id, image, kind, flavor_id, workers, gpw, started, finished in rows:
        runs = found[(team_id, image, kind)]
        if (team_id, image, kind) in keys and len(runs) < HISTORY_RUNS:
            runs.append({"seconds": (finished - started).total_seconds(), "flavor": flavor_id,
                         "gpus": workers * gpw})
    return found


def run_span(job: Job, runs: list[dict], now: datetime) -> forecast.Span:
    """The job's run time from the best evidence: its own progress, comparable runs (same flavor and size
    first), its limit."""
    running_since = _running_since(job)
    elapsed = (now - running_since).total_seconds() if running_since else 0.0
    if running_since and (progressed := progress_span(job, running_since, now)):
        return progressed
    return runtimes.span_from_runs([(r["seconds"], r["flavor"], r["gpus"]) for r in runs], flavor=job.flavor_id,
                                   units=job.total_gpus, limit=job.max_runtime_minutes * 60.0, elapsed=elapsed)


def progress_span(job: Job, running_since: datetime, now: datetime) -> forecast.Span | None:
    """The run time projected from the job's latest progress report (its run time then over the share done), where
    that report may be relied on (`runtimes.usable_progress`)."""
    if job.progress_at is None:
        return None
    at_report = (job.progress_at - running_since).total_seconds()
    share = runtimes.usable_progress(done=job.progress_done, total=job.progress_total,
                                     reports=job.progress_reports, since_start=at_report,
                                     age=(now - job.progress_at).total_seconds())
    if share is None:
        return None
    return runtimes.span(limit=job.max_runtime_minutes * 60.0, elapsed=at_report, progress=share)


def _running_since(job: Job) -> datetime | None:
    """Since its admission: it holds its quota from then, and its runtime limit counts from then (the Job's
    activeDeadlineSeconds from its start, which is when Kueue unsuspends it)."""
    if job.state not in RUNNING:
        return None
    return job.admitted_at or job.started_at


def work_for(job: Job, span: forecast.Span, *, key: int | None = None, seq: tuple | None = None) -> forecast.Work:
    since = _running_since(job)
    tier = job.priority_tier
    return forecast.Work(
        key=job.pk if key is None else key, queue=job.team.slug, flavor=job.flavor.name, units=job.total_gpus,
        priority=tier.value, seq=seq or (job.submitted_at.timestamp(), job.pk or 0), span=span, name=job.name,
        started=since.timestamp() if since else None,
        may_preempt=tier.preemption_policy != PreemptionPolicy.NEVER,
        level=job.topology_level if job.topology_mode == Placement.REQUIRED else "",
        domain=(job.placement or {}).get("domain", "") if since else "", workers=max(1, job.workers))


def cluster_jobs(cluster: Cluster) -> list[Job]:
    """Every job of the cluster that holds or waits for quota."""
    return list(Job.objects.filter(cluster=cluster).exclude(state__in=TERMINAL_STATES)
                .exclude(cancel_requested_at__isnull=False)
                .select_related("team", "flavor", "priority_tier").order_by("pk"))


def cluster_inputs(cluster: Cluster, now: datetime, extra: list[Job] = ()):
    """The world, the jobs (with `extra` ones not submitted, keyed PREVIEW_KEY - i) and their works."""
    jobs = cluster_jobs(cluster)
    everything = [*jobs, *extra]
    runs = history(cluster=cluster, keys={(j.team_id, j.image, j.kind) for j in everything}, now=now)
    works = [work_for(j, run_span(j, runs.get((j.team_id, j.image, j.kind), []), now)) for j in jobs]
    for i, job in enumerate(extra):
        span = run_span(job, runs.get((job.team_id, job.image, job.kind), []), now)
        works.append(work_for(job, span, key=PREVIEW_KEY - i, seq=(now.timestamp(), float("inf"), i)))
    world, works = with_domains(cluster, cluster_world(cluster), works, {job.pk: job.placement for job in jobs})
    return world, jobs, works


def with_domains(cluster: Cluster, world: forecast.World, works: list[forecast.Work], placements: dict[int, dict]):
    """Where a waiting job must keep within one topology domain, the world's domains and the running jobs' share
    of each, read from the cluster's Nodes and Pods (`inventory`; a job whose pods are on none of the flavor's
    nodes, from the placement its scheduler recorded): such a job waits for one domain with room, not for the
    flavor's total. Unchanged where none waits so, or the cluster could not be read."""
    if not cluster.topology_levels or not any(w.level and not w.running for w in works):
        return world, works
    found = topology_inventory(cluster, running={w.key for w in works if w.running})
    if found is None:
        return world, works
    levels = cluster.topology_levels
    works = [replace(w, held=found.held.get(w.key) or inventory.placement_held(placements.get(w.key), levels,
                                                                              w.units))
             if w.running else w for w in works]
    return replace(world, domains=found.sizes), works


def topology_inventory(cluster: Cluster, *, running: set[int]) -> inventory.Inventory | None:
    """The cluster's topology domains and what the running jobs hold in them; None (logged) when the cluster
    could not be read: the estimates then count the flavor's total, as before the domains were known. Nodes are
    reused for a minute (`nodes.cluster_nodes`); pods are read on every refresh."""
    try:
        found = nodes.cluster_nodes(cluster)
        pods = kube.client_for_cluster(cluster).list("v1", "Pod",
                                                     field_selector="status.phase!=Succeeded,status.phase!=Failed")
    except kube.KubeError as exc:
        log.warning("estimates of %s count no topology domains: its nodes and pods could not be read (%s)",
                    cluster.name, exc)
        return None
    flavors = [inventory.FlavorNodes(f.name, f.scheduled_resource(cluster.mig_strategy),
                                     f.scheduled_node_labels(cluster.mig_strategy)) for f in cluster.flavors.all()]
    return inventory.domain_inventory(nodes=found, pods=pods, flavors=flavors, levels=cluster.topology_levels,
                                      running=running)


def recent_submissions(cluster: Cluster, now: datetime,
                       works: list[forecast.Work]) -> tuple[list[arrivals.Submitted], float]:
    """The cluster's submissions of the arrivals' window that took or will take quota, newest first, with how long
    each ran (a job still running or waiting: as its estimate expects); and since when they are all known (the
    cluster's creation, or the oldest read when there were more than the most read)."""
    active = {w.key: w for w in works}
    rows = (Job.objects.filter(cluster=cluster, submitted_at__gte=now - timedelta(seconds=arrivals.WINDOW),
                               submitted_at__lte=now)
            .order_by("-submitted_at", "-pk")
            .values_list("pk", "submitted_at", "team__slug", "flavor__name", "workers", "gpus_per_worker",
                         "priority_tier__value", "priority_tier__preemption_policy", "topology_level",
                         "topology_mode", "admitted_at", "started_at", "finished_at")[:arrivals.MAX_HISTORY])
    rows = list(rows)
    since = cluster.created_at.timestamp()
    if len(rows) == arrivals.MAX_HISTORY:
        since = max(since, rows[-1][1].timestamp())
    found = []
    for pk, submitted, team, flavor, workers, gpw, priority, preemption, level, mode, admitted, started, finished \
            in rows:
        began = admitted or started
        if pk in active:
            seconds = active[pk].span.likely
        elif began is not None and finished is not None:
            seconds = max(0.0, (finished - began).total_seconds())
        else:
            continue  # ended without running: it took no quota
        found.append(arrivals.Submitted(
            submitted.timestamp(), team, flavor, workers * gpw, priority, seconds,
            may_preempt=preemption != PreemptionPolicy.NEVER, level=level if mode == Placement.REQUIRED else ""))
    return found, since


def cluster_estimates(cluster: Cluster, world: forecast.World, works: list[forecast.Work],
                      now: datetime) -> tuple[dict[int, forecast.Estimate], arrivals.Outlook]:
    """The backend's estimates, allowing for the jobs the cluster's recent history says will be submitted later."""
    past, since = recent_submissions(cluster, now, works)
    outlook = arrivals.expected(past, now.timestamp(), since=since)
    return backend_for(cluster).estimate(world, works, now.timestamp(), outlook.replays), outlook


# --- what the rows keep ---------------------------------------------------------------------------------------------


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def clock(ts: float, now: float) -> str:
    """A time as the sentence says it: 14:20 UTC today, else with its date."""
    when = datetime.fromtimestamp(ts, UTC)
    return f"{when:%H:%M} UTC" if when.date() == datetime.fromtimestamp(now, UTC).date() else f"{when:%b %d %H:%M} UTC"


def document(estimate: forecast.Estimate, works: dict[int, forecast.Work], now: float,
             free: dict[tuple[str, str], int] | None = None, outlook: arrivals.Outlook = arrivals.NONE) -> dict:
    """What a job row keeps of its estimate: kind (start, end, never), the times, the basis, one sentence.
    `free`: per (flavor, level) the most units free now in one topology domain, where the domains are known;
    `outlook`: the later submissions the estimate allowed for."""
    work = works[estimate.key]
    if estimate.never:
        return {"kind": "never", "basis": {"reason": estimate.never},
                "sentence": f"Cannot start under today's quotas: {estimate.never}."}
    if estimate.end:
        early, likely, late = estimate.end
        basis = {"run": {"evidence": work.span.evidence, "detail": work.span.detail}}
        if work.span.evidence == "progress":  # "train-42 is 60 % done after 3 h, so it ends around 15:00 UTC"
            sentence = (f"{work.name or 'It'} {_progress_words(work.span.detail)}, so it ends around "
                        f"{clock(likely, now)}{_between(early, late, now)}.")
        else:
            sentence = f"Expected to end around {clock(likely, now)}{_between(early, late, now)}: {work.span.detail}."
        return {"kind": "end", **_times(estimate.end), "basis": basis, "sentence": sentence}
    early, likely, late = estimate.start
    basis: dict = {"ahead": estimate.ahead, "queue": work.queue, "run": {"evidence": work.span.evidence,
                                                                         "detail": work.span.detail}}
    facts = []
    roomiest = (free or {}).get((work.flavor, work.level)) if work.level else None
    if roomiest is not None and roomiest < work.units and likely - now >= 60:
        basis["domain"] = {"level": work.level, "needs": work.units, "most_free": roomiest}
        facts.append(f"it needs {work.units} {work.flavor} in one {work.level}, and no {work.level} has more than "
                     f"{roomiest} free")
    if estimate.ahead:
        facts.append(f"{estimate.ahead} job{'s are' if estimate.ahead != 1 else ' is'} ahead of it in "
                     f"{work.queue}'s queue")
    if estimate.freed_by is not None and estimate.freed_by in works:
        other = works[estimate.freed_by]
        ends = other.started + other.span.likely if other.started is not None else likely
        basis["waits_for"] = {"job": other.key, "name": other.name, "ends": iso(ends),
                              "evidence": other.span.evidence, "detail": other.span.detail}
        why = (f"its runtime limit is {clock(ends, now)}" if other.span.evidence == "limit"
               else f"{other.name or 'it'} {_progress_words(other.span.detail)}, so it ends around "
                    f"{clock(ends, now)}" if other.span.evidence == "progress" else other.span.detail)
        facts.append(f"{other.units} {other.flavor} free up when {other.name or f'job {other.key}'} ends ({why})")
    if estimate.preempts:
        basis["preempts"] = list(estimate.preempts)
        facts.append(f"it would preempt {len(estimate.preempts)} lower-priority or borrowing job"
                     f"{'s' if len(estimate.preempts) != 1 else ''}")
    if estimate.later:
        basis["later"] = {"count": estimate.later, "higher_priority": estimate.later_higher,
                          "observed_hours": round(outlook.observed / 3600, 1), "submitted": outlook.submitted}
        facts.append(_later(estimate, outlook))
    if likely - now < 60 and not estimate.preempts:
        sentence = "Likely to start within a minute: there is room for it now."
    else:
        sentence = f"Likely to start around {clock(likely, now)}{_between(early, late, now)}"
        sentence += (": " + ", and ".join(facts) + ".") if facts else "."
    return {"kind": "start", **_times(estimate.start), "basis": basis, "sentence": sentence}


def _later(estimate: forecast.Estimate, outlook: arrivals.Outlook) -> str:
    """The fact in words: "allowing for about 3 jobs (2 of higher priority) expected to be submitted meanwhile and
    start first, as in the last 7 days"."""
    count, higher = estimate.later, estimate.later_higher
    jobs = f"about {count} job{'s' if count != 1 else ''}"
    if higher == count:
        jobs = f"about {count} higher-priority job{'s' if count != 1 else ''}"
    elif higher:
        jobs += f" ({higher} of higher priority)"
    days = outlook.observed / 86400
    window = f"{round(days)} days" if days >= 1.5 else f"{max(1, round(outlook.observed / 3600))} hours"
    return f"allowing for {jobs} expected to be submitted meanwhile and start first, as in the last {window}"


def _progress_words(detail: str) -> str:
    """"it is 60 % done after 3 h" as said of a named job: "is 60 % done after 3 h"."""
    return detail.removeprefix("it ")


def _times(trio) -> dict:
    return {"earliest": iso(trio[0]), "likely": iso(trio[1]), "latest": iso(trio[2])}


def _between(early: float, late: float, now: float) -> str:
    if late - early < 120:
        return ""
    return f" (between {clock(early, now)} and {clock(late, now)})"


def cluster_documents(cluster: Cluster, now: datetime, extra: list[Job] = ()) -> tuple[list[Job], dict[int, dict]]:
    world, jobs, works = cluster_inputs(cluster, now, extra)
    estimates, outlook = cluster_estimates(cluster, world, works, now)
    by_key = {w.key: w for w in works}
    free = inventory.most_free(world.domains, works)
    return jobs, {key: document(e, by_key, now.timestamp(), free, outlook=outlook) for key, e in estimates.items()}


# --- the refresh ----------------------------------------------------------------------------------------------------


def job_estimates_refresh(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Recompute the cluster's estimates and write those that changed (the status sync calls this when the
    cluster's jobs changed, submit and cancel on commit). Returns how many rows were written."""
    now = now or timezone.now()
    jobs, documents = cluster_documents(cluster, now)
    changed = []
    for job in jobs:
        new = documents.get(job.pk, {})
        if new != job.estimate:
            job.estimate = new
            changed.append(job)
    if changed:
        with transaction.atomic():
            Job.objects.bulk_update(changed, ["estimate"], batch_size=500)
    return len(changed)


STALE_AFTER = 60  # seconds past a likely start or end that no change has come to revise


def job_estimates_refresh_stale(*, now: datetime | None = None) -> list[int]:
    """Refresh the clusters where time has overtaken an estimate with nothing changing meanwhile (a job still
    waiting past its likely start, or running past its likely end): what it rested on was wrong, and the next
    estimate knows more (the run outlived its evidence). Returns the clusters refreshed."""
    now = now or timezone.now()
    cutoff = iso(now.timestamp() - STALE_AFTER)
    stale = (Job.objects.exclude(state__in=TERMINAL_STATES).filter(estimate__likely__lt=cutoff)
             .values_list("cluster_id", flat=True).distinct().order_by())
    refreshed = []
    for cluster in Cluster.objects.filter(pk__in=list(stale), active=True).order_by("pk"):
        job_estimates_refresh(cluster=cluster, now=now)
        refreshed.append(cluster.pk)
    return refreshed


def preview(*, team: Team, flavor, kind: str, image: str, workers: int, gpus_per_worker: int, tier,
            max_runtime_minutes: int, topology_level: str = "", topology_mode: str = "",
            now: datetime | None = None) -> dict:
    """The estimate a job would get if submitted now, as a row would keep it."""
    now = now or timezone.now()
    job = Job(team=team, cluster=flavor.cluster, flavor=flavor, priority_tier=tier, kind=kind, image=image,
              workers=workers, gpus_per_worker=gpus_per_worker, max_runtime_minutes=max_runtime_minutes,
              topology_level=topology_level, topology_mode=topology_mode if topology_level else "",
              submitted_at=now)
    _, documents = cluster_documents(flavor.cluster, now, [job])
    return documents[PREVIEW_KEY]


def likely_start(document_: dict) -> datetime | None:
    value = document_.get("likely") if document_.get("kind") == "start" else None
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
