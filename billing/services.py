"""The collection of usage rows (rate cards, budgets and their alerts are written by `budgets`).

Writes validate, save and audit inside one transaction; mail goes out on commit.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, transaction
from django.utils import timezone

from jobs.models import Job
from portal.enqueue import enqueue_on_commit
from tenants.choices import Sharing
from tenants.models import Cluster, GpuFlavor, Team, TeamNamespace
from tenants.selectors import is_platform_admin
from tenants.services import audit_record

from . import activity, metrics, nodes, selectors, sources, tasks
from .choices import HourState, ScrapeShape
from .devices import flavor_unit, is_dra
from .models import CapacityHour, ClusterUsageSource, CollectedHour, JobUsageHour, UsageHour

logger = logging.getLogger(__name__)

# --- Collection ------------------------------------------------------------------------------------------------
# The ledger (CollectedHour) is the record of every collection: no audit event per hour, it would only repeat it.

GPU_HOURS_QUANTUM = Decimal("0.000001")
FRACTIONAL = {Sharing.MIG, Sharing.TIME_SLICED, Sharing.MPS}


def _flavors_by_resource(flavors) -> dict[str, list[GpuFlavor]]:
    found: dict[str, list[GpuFlavor]] = {}
    for flavor in flavors:
        key = flavor_unit(flavor) if is_dra(flavor) else metrics.ksm_resource(flavor.resource_name)
        found.setdefault(key, []).append(flavor)
    return found


def _node_labels(cluster: Cluster) -> tuple[dict[str, dict[str, str]], str]:
    """The cluster's node labels when two of its flavors share a resource and GPU model (listed once for all the
    hours collected), else none; and why they could not be listed."""
    shared = any(len({f.gpu_model for f in group}) < len(group)
                 for group in _flavors_by_resource(GpuFlavor.objects.filter(cluster=cluster)).values())
    if not shared:
        return {}, ""
    try:
        return nodes.cluster_node_labels(cluster), ""
    except metrics.MetricsError as exc:
        logger.warning("nodes of %s not listed: %s", cluster.name, exc)
        return {}, str(exc)


def _gpu_hours(value: float) -> Decimal:
    return Decimal(repr(max(0.0, value))).quantize(GPU_HOURS_QUANTUM)


class _Owners:
    """Who a measurement belongs to on one cluster: namespace → team, resource, GPU model and node → flavor."""

    def __init__(self, cluster: Cluster, node_labels: dict[str, dict[str, str]] | None = None):
        self.cluster = cluster
        self.node_labels = node_labels or {}
        self.teams = {tn.team.namespace: tn.team
                      for tn in TeamNamespace.objects.filter(cluster=cluster).select_related("team")}
        self.flavors = _flavors_by_resource(GpuFlavor.objects.filter(cluster=cluster).order_by("name"))

    def flavor(self, resource: str, model: str, notes: set[str], node: str = "") -> GpuFlavor | None:
        """Flavors sharing one resource name are told apart by GPU model, and those sharing the model too (a spot
        pool beside a reserved one) by the labels of the node the device is on."""
        flavors = self.flavors.get(resource) or []
        matching = [f for f in flavors if model and f.gpu_model == model]
        if len(matching) > 1 and node:
            found = nodes.flavor_on_node(matching, self.node_labels.get(node))
            if found is not None:
                return found
        if len(flavors) > 1 and len(matching) != 1:
            where = f" on node {node}" if node else ""
            notes.add(f"{resource} on a {model or 'unknown'} GPU{where} matches {len(matching) or len(flavors)} "
                      f"flavors: counted as {(matching or flavors)[0].name}")
        return matching[0] if matching else (flavors[0] if flavors else None)

    def _split(self, resource: str, model: str) -> bool:
        return len([f for f in self.flavors.get(resource) or [] if model and f.gpu_model == model]) > 1

    def _parts(self, key: tuple, total, by_node: dict, blank) -> list[tuple[str, object]]:
        """(node, part) of a measurement whose flavor depends on the node; what no node was named for is ('', rest)."""
        if not self._split(*key[-2:]):
            return [("", total)]
        parts = [(node, part) for (*prefix, node), part in by_node.items() if tuple(prefix) == key]
        rest = blank()
        for attr in vars(rest):
            setattr(rest, attr, max(0.0, getattr(total, attr) - sum(getattr(p, attr) for _, p in parts)))
        return parts + ([("", rest)] if any(v > 1e-9 for v in vars(rest).values()) else [])

    def rows(self, usage: metrics.HourUsage, notes: set[str]) -> list[UsageHour]:
        totals: dict[tuple[int, int], tuple[Team, GpuFlavor, str, metrics.Usage]] = {}
        for (namespace, resource, model), whole in sorted(usage.namespaces.items()):
            for node, measured in self._parts((namespace, resource, model), whole, usage.node_namespaces,
                                              metrics.Usage):
                team, flavor = self.teams.get(namespace), self.flavor(resource, model, notes, node)
                if team is None or flavor is None:
                    if measured.allocated_gpu_hours > 0:
                        notes.add(f"{resource} in namespace {namespace}: " + (
                            "no team owns the namespace" if team is None else "no flavor has this resource"))
                    continue
                totals.setdefault((team.pk, flavor.pk), (team, flavor, namespace, metrics.Usage()))[3].add(measured)
        rows = []
        for team, flavor, namespace, total in totals.values():
            allocated = _gpu_hours(total.allocated_gpu_hours)
            # A MIG instance reports its parent GPU's power, and every pod sharing a time-sliced or MPS GPU sees
            # all of it: a unit is charged its fraction of it.
            share = float(flavor.fraction) if flavor.sharing in FRACTIONAL else 1.0
            rows.append(UsageHour(team=team, flavor=flavor, cluster=self.cluster, namespace=namespace,
                                  hour=usage.hour, allocated_gpu_hours=allocated,
                                  # Utilisation and requests are sampled apart: use never exceeds allocation.
                                  used_gpu_hours=min(allocated, _gpu_hours(total.used_gpu_hours)),
                                  gpu_memory_used_gib_avg=round(total.memory_gib_hours, 3),
                                  energy_kwh=_gpu_hours(total.energy_kwh * share), utilisation_signal=usage.signal))
        return rows

    def capacity_rows(self, usage: metrics.HourUsage, notes: set[str]) -> list[CapacityHour]:
        """Devices the exporters reported, per flavor: what running pods held and the unallocated rest."""
        totals: dict[int, tuple[GpuFlavor, metrics.Capacity]] = {}
        for (resource, model), whole in sorted(usage.capacity.items()):
            for node, seen in self._parts((resource, model), whole, usage.node_capacity, metrics.Capacity):
                flavor = self.flavor(resource, model, notes, node)
                if flavor is None:
                    notes.add(f"{resource} devices ({model or 'unknown model'}): no flavor has this resource")
                    continue
                total = totals.setdefault(flavor.pk, (flavor, metrics.Capacity()))[1]
                total.capacity += seen.capacity
                total.held += seen.held
        rows = []
        for flavor, total in totals.values():
            capacity = _gpu_hours(total.capacity)
            allocated = min(capacity, _gpu_hours(total.held))
            rows.append(CapacityHour(cluster=self.cluster, flavor=flavor, hour=usage.hour,
                                     capacity_gpu_hours=capacity, allocated_gpu_hours=allocated,
                                     unallocated_gpu_hours=capacity - allocated))
        return rows

    def job_rows(self, usage: metrics.HourUsage, jobs: dict[int, Job]) -> list[JobUsageHour]:
        """A pod's job label is trusted only for a job of the team owning the pod's namespace, on this cluster."""
        rows = []
        for (namespace, label), measured in sorted(usage.jobs.items()):
            job = jobs.get(int(label)) if label.isdigit() else None
            allocated = _gpu_hours(measured.allocated_gpu_hours)
            if job is None or job.team.namespace != namespace or allocated <= 0:
                continue
            used = min(allocated, _gpu_hours(measured.used_gpu_hours))
            sm, tensor = (round(min(1.0, gpu_hours / float(allocated)), 4) if field in usage.exported else None
                          for gpu_hours, field in ((measured.sm_active_gpu_hours, activity.SM_ACTIVE),
                                                   (measured.tensor_active_gpu_hours, activity.TENSOR_ACTIVE)))
            rows.append(JobUsageHour(job=job, flavor=job.flavor, hour=usage.hour, allocated_gpu_hours=allocated,
                                     used_gpu_hours=used, utilisation_avg=round(float(used / allocated), 4),
                                     utilisation_signal=usage.signal,
                                     gpu_memory_used_gib_avg=round(measured.memory_gib_hours, 3),
                                     sm_active_avg=sm, tensor_active_avg=tensor))
        return rows


def usage_collect_hours(*, cluster: Cluster, hours: list[datetime], source: metrics.MetricsSource | None = None,
                        now: datetime | None = None, stop_on_failure: bool = False) -> list[CollectedHour]:
    """Collect complete hours of one cluster; each collected hour's rows replace what it held before.

    The source is read first, outside any transaction. An hour answered with gaps or NaN is billed for what was
    observed and marked partial with the steps missing, to be collected again (replacing, never adding). An hour the
    source fails on keeps its rows exactly as they were; its ledger row says why. With `stop_on_failure`, the first
    failure ends the batch (when Prometheus is down, every further hour would only wait for the same timeout).
    """
    now = now or timezone.now()
    hours = [metrics.check_hour(hour) for hour in hours]
    for hour in hours:
        if hour + metrics.HOUR > now:
            raise ValidationError(f"The hour {hour:%Y-%m-%d %H:00} UTC is not over yet.")
    outcomes: list[tuple[datetime, str, str, metrics.HourUsage | None]] = []
    try:
        source = source or sources.source_for(cluster)
    except metrics.MetricsError as exc:
        source, outcomes = None, [(hour, HourState.FAILED, str(exc), None)
                                  for hour in (hours[:1] if stop_on_failure else hours)]
    labels, unlisted = _node_labels(cluster) if source is not None else ({}, "")
    for hour in hours if source is not None else []:
        try:
            usage = source.hour_usage(hour)
        except metrics.MetricsError as exc:
            logger.warning("usage of %s at %s not collected: %s", cluster.name, hour.isoformat(), exc)
            outcomes.append((hour, HourState.FAILED, str(exc), None))
            if stop_on_failure:
                break
            continue
        if unlisted:  # flavors sharing a resource and model cannot be told apart: collected again later
            usage.problems.append(unlisted)
        outcomes.append((hour, HourState.PARTIAL if usage.problems else HourState.COLLECTED, "", usage))
    return _usage_record(cluster=cluster, outcomes=outcomes, now=now, node_labels=labels)


def cluster_usage_source_save(*, cluster: Cluster, **values) -> ClusterUsageSource:
    """A cluster's usage source, written inside the cluster's own write, which audits both (tenants.cluster_parts)."""
    source = sources.usage_source_of(cluster)
    for name, value in values.items():
        setattr(source, name, value)
    source.full_clean()
    source.save()
    return source


def cluster_usage_source_values(cluster: Cluster) -> dict:
    source = sources.usage_source_of(cluster)
    return {"prometheus_url": source.prometheus_url, "scrape_shape": source.scrape_shape}


def _scrape_shape_record(cluster: Cluster, collected: list[metrics.HourUsage], now: datetime) -> None:
    """Keep the scrape setup the newest collected hour showed, for the cluster page."""
    seen = [usage for usage in sorted(collected, key=lambda u: u.hour) if usage.scrape_shape]
    source = sources.usage_source_of(cluster)
    if seen and (source.scrape_shape_seen, source.scrape_shape_seen_at) != (seen[-1].scrape_shape, now):
        source.scrape_shape_seen, source.scrape_shape_seen_at = seen[-1].scrape_shape, now
        seen_fields = {"scrape_shape_seen": source.scrape_shape_seen, "scrape_shape_seen_at": now}
        if not ClusterUsageSource.objects.filter(cluster_id=cluster.pk).update(**seen_fields):
            ClusterUsageSource.objects.create(cluster_id=cluster.pk, **seen_fields)


def _shape_note(cluster: Cluster, usage: metrics.HourUsage) -> str:
    setting = sources.usage_source_of(cluster).scrape_shape
    if setting and usage.scrape_shape and usage.scrape_shape != setting:
        return (f"the series look like {ScrapeShape(usage.scrape_shape).label} but the cluster is set to "
                f"{ScrapeShape(setting).label}: pods' GPUs may be counted as unallocated")
    return ""


@transaction.atomic
def _usage_record(*, cluster: Cluster, outcomes: list, now: datetime,
                  node_labels: dict[str, dict[str, str]] | None = None) -> list[CollectedHour]:
    # Collections of one cluster queue up here, so two workers never interleave their replacements of an hour.
    list(Cluster.objects.select_for_update(no_key=True).filter(pk=cluster.pk).values_list("pk", flat=True))
    owners = _Owners(cluster, node_labels)
    collected = [usage for _, _, _, usage in outcomes if usage is not None]
    job_ids = {int(label) for usage in collected for _, label in usage.jobs if label.isdigit()}
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=job_ids, cluster=cluster).select_related("team",
                                                                                                       "flavor")}
    rows, job_rows, capacity_rows, messages, missing, signals = [], [], [], {}, {}, {}
    for usage in collected:
        signals[usage.hour] = (usage.signal, sorted(usage.exported))
        notes: set[str] = set()
        rows += owners.rows(usage, notes)
        job_rows += owners.job_rows(usage, jobs)
        capacity_rows += owners.capacity_rows(usage, notes)
        shape_note = _shape_note(cluster, usage)
        messages[usage.hour] = "; ".join(usage.problems + ([shape_note] if shape_note else []) + sorted(notes))
        missing[usage.hour] = usage.steps_missing
    replaced = [usage.hour for usage in collected]
    UsageHour.objects.filter(cluster=cluster, hour__in=replaced).delete()
    JobUsageHour.objects.filter(job__cluster=cluster, hour__in=replaced).delete()
    CapacityHour.objects.filter(cluster=cluster, hour__in=replaced).delete()
    # Rows are built from rows just read and from non-negative, capped numbers; the table's unique and check
    # constraints still guard them (full_clean would re-read every foreign key, row by row).
    UsageHour.objects.bulk_create(rows, batch_size=1000)
    JobUsageHour.objects.bulk_create(job_rows, batch_size=1000)
    CapacityHour.objects.bulk_create(capacity_rows, batch_size=1000)
    _scrape_shape_record(cluster, collected, now)

    existing = {row.hour: row for row in CollectedHour.objects.filter(cluster=cluster,
                                                                       hour__in=[o[0] for o in outcomes])}
    ledgers = []
    for hour, state, message, _ in outcomes:
        ledger = existing.get(hour) or CollectedHour(cluster=cluster, hour=hour, attempts=0)
        ledger.state, ledger.collected_at = state, now
        ledger.message = messages.get(hour, message)
        # A failed attempt leaves the hour's rows as they were, so it keeps the count of the steps they miss.
        ledger.steps_missing = missing.get(hour, ledger.steps_missing if state == HourState.FAILED else 0)
        if hour in signals:  # likewise the signal its rows were read from
            ledger.utilisation_signal, ledger.activity_fields = signals[hour]
        ledger.attempts += 1
        ledgers.append(ledger)
    CollectedHour.objects.bulk_update([lg for lg in ledgers if lg.pk is not None],
                                      ["state", "message", "steps_missing", "utilisation_signal", "activity_fields",
                                       "attempts", "collected_at"],
                                      batch_size=1000)
    CollectedHour.objects.bulk_create([lg for lg in ledgers if lg.pk is None], batch_size=1000)
    return ledgers


def usage_collect_hour(*, cluster: Cluster, hour: datetime, source: metrics.MetricsSource | None = None,
                       now: datetime | None = None) -> CollectedHour:
    """Collect one complete hour of one cluster (see `usage_collect_hours`)."""
    return usage_collect_hours(cluster=cluster, hours=[hour], source=source, now=now)[0]


@transaction.atomic
def usage_recollect(*, actor, ledgers: list[CollectedHour], source_ip: str | None = None) -> int:
    """A platform admin asks for hours to be collected again (the admin's action): audited per hour, collected by a
    worker once this commits; each hour's ledger row then records the outcome."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins re-collect usage.")
    for ledger in ledgers:
        audit_record(actor=actor, action="usage.recollect", obj=ledger,
                     before={"state": ledger.state, "message": ledger.message}, source_ip=source_ip)
        enqueue_on_commit(tasks.usage_collect_hour_task, ledger.cluster_id, ledger.hour.isoformat())
    return len(ledgers)


def usage_hours_due(*, cluster: Cluster, now: datetime) -> list[datetime]:
    """The hours still to collect: every complete hour of the backfill window (and of the cluster's life) that
    is missing from the ledger or failed or partial last time, newest first."""
    last = selectors.floor_hour(now) - metrics.HOUR
    first = max(last - timedelta(days=settings.BILLING_BACKFILL_DAYS) + metrics.HOUR,
                selectors.floor_hour(cluster.created_at))
    done = set(CollectedHour.objects.filter(cluster=cluster, hour__gte=first, hour__lte=last,
                                            state=HourState.COLLECTED).values_list("hour", flat=True))
    hours = []
    hour = last
    while hour >= first:
        if hour not in done:
            hours.append(hour)
        hour -= metrics.HOUR
    return hours


def usage_collect_due(*, now: datetime | None = None) -> dict[str, int]:
    """Collect the last complete hour of every active cluster and backfill what is missing in the window.

    Returns how many hours each cluster collected. A cluster's run stops at its first failed hour.
    """
    now = now or timezone.now()
    collected = {}
    for cluster in Cluster.objects.filter(active=True).select_related("usage_source").order_by("pk"):
        try:
            hours = usage_hours_due(cluster=cluster, now=now)
            ledgers = (usage_collect_hours(cluster=cluster, hours=hours, now=now, stop_on_failure=True)
                       if hours else [])
        except DatabaseError:
            raise  # the database, not this cluster: the task retries the whole run
        except Exception:  # noqa: BLE001 - one cluster's surprise must not stop the others' collection
            logger.exception("usage collection of cluster %s failed", cluster.name)
            ledgers = []
        collected[cluster.name] = sum(ledger.state == HourState.COLLECTED for ledger in ledgers)
    return collected
