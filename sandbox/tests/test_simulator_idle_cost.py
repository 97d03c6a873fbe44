"""A sandbox with thousands of queued workloads stays cheap: a cycle in which nothing the schedulers read has changed
is skipped (as Kueue parks inadmissible workloads until their queue changes), and the first change after it (more
quota, a job that ended, a requeue time that came) is acted on at the next step."""

import time

import pytest

from bench.bench_simulator import _job, _world
from sandbox import Sandbox

QUEUED = 500


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_a_steady_queue_of_thousands_costs_no_scheduling(backend, monkeypatch):
    with Sandbox(simulate=True, tick=None, simulation={"duration": 1e9, "startup": 0}) as sb:
        _world(sb, backend, 100)
        for i in range(QUEUED):
            _job(sb, backend, f"job-{i}")
        sim = sb.simulator
        for t in (1.0, 2.0, 3.0):
            sim.step(t)
        scheduler = sim.schedulers[backend]
        calls = []
        original = scheduler.schedule
        monkeypatch.setattr(scheduler, "schedule", lambda *a, **k: (calls.append(1), original(*a, **k))[1])
        started = time.process_time()
        for t in range(10):
            sim.step(4.0 + t)
        assert calls == []  # before: every one of the 400 waiting jobs, every step
        assert (time.process_time() - started) / 10 < 0.01
        assert sum(1 for j in sim.jobs() if j["state"] != "pending") == 100
        # More quota is a write to the store: the next step admits the jobs it lets in.
        _world_more_quota(sb, backend, 150)
        sim.step(20.0)
        assert len(calls) > 0
        assert sum(1 for j in sim.jobs() if j["state"] != "pending") == 150


def _world_more_quota(sb, backend, gpus):
    store = sb.store
    if backend == "kueue":
        kind = store.kind("kueue.x-k8s.io/v1beta2", "ClusterQueue")
        cq = store.get(kind, None, "cq")
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = str(gpus)
        store.update(kind, cq, None, "cq")
    else:
        kind = store.kind("scheduling.volcano.sh/v1beta1", "Queue")
        queue = store.get(kind, None, "team")
        amount = {"nvidia.com/gpu": str(gpus)}
        queue["spec"].update({"capability": amount, "deserved": amount, "guarantee": {"resource": amount}})
        store.update(kind, queue, None, "team")
