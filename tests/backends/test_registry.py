"""The scheduler seam: every backend fills in the whole protocol, is found by a cluster or its scheduler's name, and
shares the rules that must be one (the latest refusal event, the job a scheduler's record belongs to)."""

import inspect

import pytest
from django.core.exceptions import ImproperlyConfigured

from backends import Backend, backend_for, backends, keep_latest_refusal, latest_refusals, record_owner
from tenants.choices import Scheduler


def _members(protocol) -> set[str]:
    names = {name for name, _ in inspect.getmembers(protocol, inspect.isfunction)}
    return names | set(getattr(protocol, "__annotations__", {}))


def test_every_scheduler_has_a_backend_and_every_backend_the_whole_protocol():
    assert sorted(b.name for b in backends()) == sorted(Scheduler.values)
    for backend in backends():
        missing = {name for name in _members(Backend) if not hasattr(backend, name)}
        assert not missing, f"{backend.name} lacks {sorted(missing)}"


def test_a_backend_is_found_by_its_cluster_or_its_name():
    cluster = type("Cluster", (), {"scheduler": Scheduler.VOLCANO})()
    assert backend_for(cluster) is backend_for("volcano") and backend_for("volcano").name == Scheduler.VOLCANO
    with pytest.raises(ImproperlyConfigured):
        backend_for("yunikorn")


def _event(name, when, message, field="lastTimestamp"):
    return {"involvedObject": {"name": name}, field: when, "message": message}


def test_the_latest_refusal_of_each_object_is_kept_whatever_the_order_it_arrives_in():
    events = [_event("pg-a", "2026-01-01T10:00:00Z", "old"), _event("pg-a", "2026-01-01T10:05:00Z", "new"),
              _event("pg-a", "2026-01-01T10:01:00Z", "late"), _event("pg-b", "2026-01-01T09:00:00Z", "b", "eventTime"),
              _event("", "2026-01-01T11:00:00Z", "nobody")]
    assert latest_refusals(events) == {"pg-a": "new", "pg-b": "b"}
    latest: dict = {}
    assert [keep_latest_refusal(latest, e) for e in events] == [True, True, False, True, False]


def test_the_latest_event_of_each_reason_is_kept_apart():
    """Volcano's enqueue refusals and evictions come in one list of a PodGroup's Normal Events: a newer eviction
    does not hide the refusal, nor the other way round."""
    events = [{**_event("pg-a", "2026-01-01T10:00:00Z", "queue resource quota insufficient"),
               "reason": "Unschedulable"},
              {**_event("pg-a", "2026-01-01T10:05:00Z", "reclaim"), "reason": "Evict"},
              {**_event("pg-a", "2026-01-01T10:01:00Z", "preempt"), "reason": "Evict"}]
    assert latest_refusals(events) == {"pg-a/Unschedulable": "queue resource quota insufficient",
                                       "pg-a/Evict": "reclaim"}


@pytest.mark.parametrize(("metadata", "owner"), [
    ({"name": "job-x-123", "ownerReferences": [{"kind": "Job", "name": "train-7"}]}, "train-7"),
    ({"name": "rayjob-x", "ownerReferences": [{"kind": "RayJob", "name": "ray-8"}]}, "ray-8"),
    ({"name": "wl", "labels": {"kueue.x-k8s.io/job-name": "batch-9"}}, "batch-9"),
    ({"name": "pg", "labels": {"volcano.sh/job-name": "vc-10"}}, "vc-10"),
    ({"name": "alone"}, "alone"),
])
def test_a_record_belongs_to_its_owner_else_its_job_name_label(metadata, owner):
    assert record_owner({"metadata": metadata}) == owner
