"""The cluster watcher (`manage.py watch_clusters`): live job status and drift of owned objects, by informers.

Per cluster, one process at a time (a lease) keeps an informer per kind the portal reads, as Kueue, Volcano and
KubeRay's controllers do (client-go tools/cache/reflector.go): list once, then watch from the list's
resourceVersion with bookmarks, resume from the last version seen after a disconnect (with backoff), relist when
the server says the version is gone (410 Expired) or newer than it knows (a restarted API server). The cache it
keeps feeds the same status derivation as the polling sync (`sync.job_changes`), for the jobs whose objects
moved, at the time the event arrived; only real changes are written. A change to an object reconcile owns that
is not a status update (an edit or a deletion by hand) nudges reconcile at once.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone

from portal import kube, metrics
from portal.lease import Lease
from quotas import usage as quota_usage
from tenants.models import Cluster, TeamNamespace
from tenants.nudges import clusters_touch, team_namespaces_touch
from tenants.selectors import active_clusters

from . import holds, sync
from .watch_cache import ClusterCache, watched_kinds

log = logging.getLogger(__name__)

class Informer:
    """List then watch one kind across namespaces, feeding `sink(kind, event_type, obj, arrived)`; `sink.replace(
    kind, items, arrived)` after each (re)list."""

    def __init__(self, client, kind: tuple[str, str], label_selector: str, field_selector: str, sink, stop):
        self.client, self.kind, self.sink, self.stop = client, kind, sink, stop
        self.label_selector, self.field_selector = label_selector, field_selector
        self.resource_version = ""
        self.lists = self.watches = 0
        self._stream = None

    def run(self) -> None:
        backoff = 0.0
        while not self.stop.is_set():
            try:
                if not self.resource_version:
                    self.lists += 1
                    items, self.resource_version = self.client.list_versioned(
                        *self.kind, label_selector=self.label_selector, field_selector=self.field_selector)
                    self.sink.replace(self.kind, items, timezone.now())
                    if not self.resource_version:  # a kind the cluster does not serve: nothing to watch
                        self.stop.wait(settings.WATCH_RELIST_SECONDS)
                        continue
                self._watch()
                backoff = 0.0
            except kube.KubeError as exc:
                if self.stop.is_set():
                    return  # the stream was closed to stop
                if exc.status in (410, 504) or exc.reason in ("Expired", "Gone"):
                    log.info("watch of %s: %s; relisting", self.kind[1], exc)
                    self.resource_version = ""  # too old or too new for the server: start over from a list
                    continue
                backoff = min(max(backoff * 2, 0.2), settings.WATCH_BACKOFF_MAX_SECONDS)
                log.warning("watch of %s failed: %s; again in %.1f s", self.kind[1], exc, backoff)
                self.stop.wait(backoff * random.uniform(0.5, 1.0))
            except Exception:  # noqa: BLE001 - a bug in one event must not end this kind's watch for good
                backoff = settings.WATCH_BACKOFF_MAX_SECONDS
                log.exception("watch of %s failed; relisting in %.0f s", self.kind[1], backoff)
                self.resource_version = ""
                self.stop.wait(backoff)

    def _watch(self) -> None:
        self.watches += 1
        stream = self.client.watch(*self.kind, resource_version=self.resource_version,
                                   label_selector=self.label_selector, field_selector=self.field_selector,
                                   timeout_seconds=settings.WATCH_TIMEOUT_SECONDS)
        self._stream = stream
        if self.stop.is_set():
            stream.close()
        for event in stream:
            obj = event.get("object") or {}
            self.resource_version = (obj.get("metadata") or {}).get("resourceVersion") or self.resource_version
            if event.get("type") != "BOOKMARK":
                obj.setdefault("apiVersion", self.kind[0])
                obj.setdefault("kind", self.kind[1])
                self.sink.event(self.kind, event["type"], obj, timezone.now())
            if self.stop.is_set():
                break

    def close(self) -> None:
        stream = self._stream
        if stream is not None:
            stream.close()


class ClusterWatcher:
    """The watcher of one cluster: waits for its lease, then runs the informers and writes what they bring."""

    def __init__(self, cluster: Cluster, stop: threading.Event):
        self.cluster_id, self.name, self.scheduler = cluster.pk, cluster.name, cluster.scheduler
        self.cluster = cluster
        self.stop = stop
        self.lease = Lease(f"watch-cluster-{cluster.pk}", settings.WATCH_LEASE_SECONDS)
        self.cache = ClusterCache(self)
        self._marked = 0.0

    def run(self) -> None:
        renew = settings.WATCH_LEASE_SECONDS / 3
        try:
            with contextlib.suppress(kube.KubeError):  # a standby is ready to take over at once
                kube.client_for_cluster(self.cluster)
            while not self.stop.is_set():
                if self.lease.acquire_or_renew():
                    try:
                        self._lead(renew)
                    except kube.KubeError as exc:  # a connection that cannot be built: shown, tried again
                        log.warning("cannot watch cluster %s: %s", self.name, exc)
                        self.stop.wait(settings.WATCH_RELIST_SECONDS)
                    except Exception:  # noqa: BLE001 - a database outage mid-lead: let go, lead again later
                        log.exception("watching cluster %s failed; again in %.0f s", self.name, renew * 3)
                        self.lease.release()
                        close_old_connections()
                        self.stop.wait(renew * 3)
                else:
                    self.stop.wait(renew)
        finally:
            self.lease.release()
            connections.close_all()  # this thread's own connection

    def _lead(self, renew: float) -> None:
        log.info("watching cluster %s (lease %s)", self.name, self.lease.token)
        leading = threading.Event()
        client = kube.client_for_cluster(self.cluster)
        self.cache.reset()
        informers = [Informer(client, kind, labels, fields, self.cache, leading)
                     for kind, labels, fields in watched_kinds(self.scheduler)]
        threads = [threading.Thread(target=i.run, name=f"watch-{self.name}-{i.kind[1]}", daemon=True)
                   for i in informers]
        for thread in threads:
            thread.start()
        next_renew = time.monotonic() + renew
        try:
            while not self.stop.is_set():
                if time.monotonic() >= next_renew:
                    if not self.lease.acquire_or_renew():
                        log.warning("lost the lease of cluster %s", self.name)
                        break
                    next_renew = time.monotonic() + renew
                if self.lease.held():
                    self._flush()
                self.stop.wait(settings.WATCH_FLUSH_SECONDS)
        finally:
            leading.set()
            for informer in informers:
                informer.close()
            for thread in threads:
                thread.join(timeout=5)

    def _flush(self) -> None:
        """Write what moved. A database that is away is retried on the next round; what moved stays marked."""
        try:
            self.cache.flush()
            now = time.monotonic()
            if now - self._marked >= 1:  # watcher lag is measured from this mark (at most once a second)
                self._marked = now
                metrics.watcher_flushed(self.name)
        except Exception:  # noqa: BLE001 - the watcher outlives a database restart
            log.exception("writing the changes of cluster %s failed; the next relist repairs it", self.name)
            close_old_connections()
            self.cache.mark_all()

    # What the cache hands back ---------------------------------------------------------------------------------

    def write(self, changed) -> None:
        if changed and self.lease.held():  # fenced: a watcher that may have lost its lease writes nothing
            sync.job_changes_write(changed)

    def record_usage(self, usage: dict[str, list[dict]]) -> None:
        """Refresh the recorded in-use of the teams whose quota objects' status changed (only real changes)."""
        if not self.lease.held():
            return
        for row in TeamNamespace.objects.filter(cluster_id=self.cluster_id, team__slug__in=list(usage),
                                                deleted_at__isnull=True).select_related("team"):
            quota_usage.record_usage(row, usage[row.team.slug])

    def budget_decide(self) -> None:
        """A workload waits on the budget check: the holds are judged now rather than at the next beat."""
        if self.lease.held():
            holds.decide_now()

    def nudge(self, team_slugs: set[str], cluster_scoped: bool) -> None:
        if not self.lease.held():
            return
        if team_slugs:
            team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(
                cluster_id=self.cluster_id, team__slug__in=team_slugs, deleted_at__isnull=True))
        if cluster_scoped:
            clusters_touch(clusters=Cluster.objects.filter(pk=self.cluster_id))


def watch_enabled(cluster: Cluster) -> bool:
    names = settings.WATCH_CLUSTERS
    return names == ["*"] or cluster.name in names


def run(stop: threading.Event, heartbeat: str | None = None) -> None:
    """Watch every active cluster the settings allow until `stop`; clusters added later are picked up.

    Outlives a database that is away (the clusters cannot be listed: tried again with capped backoff, the running
    watchers go on) and a cluster watcher that ended unexpectedly (started again on the next round)."""
    watchers: dict[int, tuple[ClusterWatcher, threading.Thread]] = {}
    failures = 0
    while not stop.is_set():
        if heartbeat:
            Path(heartbeat).touch()
        try:
            close_old_connections()
            _start_watchers(watchers, stop)
            failures = 0
            wait = settings.WATCH_RELIST_SECONDS
        except Exception as exc:  # noqa: BLE001 - the database (or anything else) away: retry, never exit
            failures += 1
            wait = min(settings.WATCH_BACKOFF_MAX_SECONDS, 0.5 * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0)
            log.warning("cannot list the clusters to watch (%s: %s); again in %.1f s", type(exc).__name__, exc, wait)
            with contextlib.suppress(Exception):
                connections.close_all()
        stop.wait(wait)
    for _, thread in watchers.values():
        thread.join(timeout=10)


def _start_watchers(watchers: dict, stop: threading.Event) -> None:
    for cluster in active_clusters():
        running = watchers.get(cluster.pk)
        if (running is not None and running[1].is_alive()) or not watch_enabled(cluster):
            continue
        if running is not None:
            log.warning("the watcher of cluster %s had ended; starting it again", cluster.name)
        watcher = ClusterWatcher(cluster, stop)
        thread = threading.Thread(target=watcher.run, name=f"watch-{cluster.name}", daemon=True)
        watchers[cluster.pk] = (watcher, thread)
        thread.start()


def watcher_active(cluster: Cluster) -> bool:
    """Whether a watcher holds this cluster's lease now (so the polling sync can leave the cluster to it)."""
    return watch_enabled(cluster) and Lease(f"watch-cluster-{cluster.pk}", 1).holder() is not None
