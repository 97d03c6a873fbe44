"""The watcher's main loop outlives a database that is away (it cannot list the clusters: it tries again with
backoff instead of exiting) and a cluster watcher that ended (it is started again)."""

import threading
import types

from django.db import OperationalError
from django.test import override_settings

from jobs import watch


def _run_until(stop: threading.Event, timeout: float = 10) -> list[BaseException]:
    errors = []

    def target():
        try:
            watch.run(stop)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    return errors


@override_settings(WATCH_RELIST_SECONDS=0.01, WATCH_BACKOFF_MAX_SECONDS=0.02)
def test_the_loop_rides_out_a_database_outage(monkeypatch):
    stop, calls = threading.Event(), []

    def clusters():
        calls.append(1)
        if len(calls) <= 3:
            raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")
        stop.set()  # the database is back: the loop listed the clusters again
        return []

    monkeypatch.setattr(watch, "active_clusters", clusters)
    monkeypatch.setattr(watch, "close_old_connections", lambda: None)
    assert _run_until(stop) == []
    assert len(calls) == 4


@override_settings(WATCH_RELIST_SECONDS=0.01, WATCH_CLUSTERS=["*"])
def test_a_cluster_watcher_that_ended_is_started_again(monkeypatch):
    stop, runs = threading.Event(), []
    cluster = types.SimpleNamespace(pk=1, name="east", scheduler="kueue")

    class Dying:
        def __init__(self, cluster, stop):
            pass

        def run(self):
            runs.append(1)
            if len(runs) >= 3:
                stop.set()

    monkeypatch.setattr(watch, "active_clusters", lambda: [cluster])
    monkeypatch.setattr(watch, "close_old_connections", lambda: None)
    monkeypatch.setattr(watch, "ClusterWatcher", Dying)
    assert _run_until(stop) == []
    assert len(runs) >= 3
