"""The cluster watcher watches every kind the portal owns, as the desired-state registry and each backend list
them: drift on any of them (Kueue's Topology included) is repaired when it happens, not at the next sweep."""

import pytest

from backends import backend_for, backends
from jobs.watch_cache import watched_kinds
from portal import desired
from portal.upstream import KUEUE_API
from tenants.choices import Scheduler


@pytest.mark.parametrize("scheduler", [backend.name for backend in backends()])
def test_every_owned_kind_is_watched(scheduler):
    watched = {kind for kind, _, _ in watched_kinds(scheduler)}
    owned = set(desired.team_kinds(scheduler) + desired.cluster_kinds(scheduler))
    assert owned and owned <= watched, f"owned but not watched: {sorted(owned - watched)}"
    assert backend_for(scheduler).record_kind in watched
    assert set(backend_for(scheduler).job_kinds) <= watched


def test_the_kueue_topology_is_watched():
    assert (KUEUE_API, "Topology") in {kind for kind, _, _ in watched_kinds(Scheduler.KUEUE)}

