"""The cluster watcher against a standalone sandbox process: `manage.py watch_clusters` runs as processes of its own
(killed, restarted, two at once) on the test database, and a job's status moves in the cluster by the API."""

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from jobs import watch
from jobs.choices import JobState
from jobs.models import Job
from portal import kube
from tests.jobs.conftest import build_world
from tests.jobs.test_simulated import submit
from tests.requires import unavailable

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
LEASE = 2.0


def _redis():
    if not settings.REDIS_URL:
        unavailable("REDIS_URL is not set: the watcher's lease lives in Redis", flag="REQUIRE_REDIS")
    return redis.Redis.from_url(settings.REDIS_URL)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Standalone:
    """`python -m sandbox serve` on a fixed port with a state file, restartable."""

    def __init__(self, tmp_path):
        self.port, self.state = _free_port(), tmp_path / "sandbox.json"
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None

    def start(self):
        self.process = subprocess.Popen([sys.executable, "-m", "sandbox", "serve", "--port", str(self.port),
                                         "--state", str(self.state), "--bookmark-interval", "1"],
                                        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().startswith("sandbox serving on"), self.process.stderr.read()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)


@pytest.fixture
def standalone(tmp_path):
    sb = Standalone(tmp_path)
    sb.start()
    yield sb
    if sb.process.poll() is None:
        sb.stop()
    kube.forget_clients()


@pytest.fixture
def watchers():
    """Start `manage.py watch_clusters` processes on the test database; all are killed at the end."""
    started, logs = [], []
    env = {**os.environ, "DATABASE_URL": _database_url(), "WATCH_LEASE_SECONDS": str(LEASE),
           "WATCH_TIMEOUT_SECONDS": "20", "WATCH_BACKOFF_MAX_SECONDS": "0.5", "WATCH_RELIST_SECONDS": "1"}

    def start():
        process = subprocess.Popen([sys.executable, "manage.py", "watch_clusters"], cwd=ROOT, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(process)
        lines = []
        while not lines or lines[-1] != "watching clusters":
            line = process.stdout.readline()
            assert line, "the watcher did not start:\n" + "".join(lines)
            lines.append(line.strip())
        logs.append(lines)
        threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()  # the pipe never fills
        return process

    def in_sync(index: int = -1, seconds: float = 20):
        _until(lambda: any("in sync" in line for line in logs[index]), seconds, "the watcher has listed")

    start.in_sync = in_sync
    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
            process.kill()
            process.wait()
    for lines in logs:  # shown when the test fails
        print("".join(line if line.endswith("\n") else line + "\n" for line in lines))


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql":
        unavailable("the watcher process shares the test database: needs PostgreSQL", flag="REQUIRE_POSTGRESQL")
    return f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def _until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"not within {seconds} s: {what}")


def _state(job) -> str:
    return Job.objects.filter(pk=job.pk).values_list("state", flat=True).get()


def _run(world, job, *, ready: int = 1):
    """What the Job controller writes once a Kueue-admitted job's pods run."""
    client = kube.client_for_cluster(world["cluster"])
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    name, namespace = job.object_name, world["team"].namespace
    client._call("PATCH", kube.path_for("batch/v1", "Job", namespace, name), body={"spec": {"suspend": False}},
                 content_type="application/merge-patch+json")
    client._call("PATCH", kube.path_for("batch/v1", "Job", namespace, name) + "/status",
                 body={"status": {"startTime": now, "active": ready, "ready": ready}},
                 content_type="application/merge-patch+json")


def _succeed(world, job):
    client = kube.client_for_cluster(world["cluster"])
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [{"type": t, "status": "True", "lastTransitionTime": now} for t in ("SuccessCriteriaMet", "Complete")]
    client._call("PATCH", kube.path_for("batch/v1", "Job", world["team"].namespace, job.object_name) + "/status",
                 body={"status": {"active": 0, "ready": 0, "succeeded": 1, "completionTime": now,
                                  "conditions": conditions}},
                 content_type="application/merge-patch+json")


def _holder(world) -> str | None:
    value = _redis().get(f"gpu-portal:lease:watch-cluster-{world['cluster'].pk}")
    return value.decode() if value else None


def _world(standalone, run_on_commit):
    _redis().delete(*(_redis().keys("gpu-portal:lease:watch-cluster-*") or ["none"]))
    world = build_world(standalone.url, "kueue")
    job = submit(world, run_on_commit, kind="batch", name="live")
    assert _state(job) == JobState.QUEUED
    return world, job


def test_a_status_change_reaches_the_database_within_a_second(standalone, watchers, run_on_commit):
    world, job = _world(standalone, run_on_commit)
    watchers()
    watchers.in_sync()
    changed = time.monotonic()
    _run(world, job)
    _until(lambda: _state(job) == JobState.RUNNING, 1.0, "RUNNING reaches the row")
    row = Job.objects.get(pk=job.pk)
    assert row.started_at is not None and row.admitted_at is not None
    assert time.monotonic() - changed < 5
    # The polling sync leaves a watched cluster alone.
    from jobs import sync as job_sync

    assert job_sync.job_status_sync_all()["watched"] == [world["cluster"].name]


def test_killed_and_restarted_watcher_loses_nothing(standalone, watchers, run_on_commit):
    world, job = _world(standalone, run_on_commit)
    first = watchers()
    watchers.in_sync()
    first.kill()
    first.wait()
    _run(world, job)  # while no watcher runs
    time.sleep(0.3)
    assert _state(job) == JobState.QUEUED
    watchers()
    watchers.in_sync()
    _until(lambda: _state(job) == JobState.RUNNING, 1, "the restarted watcher's list brings RUNNING")


def test_sandbox_restart_relists_and_converges(standalone, watchers, run_on_commit):
    world, job = _world(standalone, run_on_commit)
    watchers()
    watchers.in_sync()
    standalone.stop()
    time.sleep(1.0)  # the watcher sees the API server gone and backs off
    standalone.start()
    _run(world, job)
    _until(lambda: _state(job) == JobState.RUNNING, 10, "RUNNING after the API server came back")
    _succeed(world, job)
    _until(lambda: _state(job) == JobState.SUCCEEDED, 5, "SUCCEEDED after the restart")


def test_two_watchers_one_active_and_fail_over(standalone, watchers, run_on_commit):
    world, job = _world(standalone, run_on_commit)
    processes = {p.pid: p for p in (watchers(), watchers())}
    holder = _until(lambda: _holder(world), 10, "one watcher takes the lease")
    active_pid = int(holder.split(":")[1])
    assert active_pid in processes
    time.sleep(LEASE)
    assert _holder(world) == holder  # the other stays a standby
    processes[active_pid].kill()
    processes[active_pid].wait()
    killed = time.monotonic()
    standby = _until(lambda: (_holder(world) or holder) != holder and _holder(world), LEASE + 5,
                     "the standby takes over")
    assert int(standby.split(":")[1]) in set(processes) - {active_pid}
    assert time.monotonic() - killed < LEASE + 5
    _run(world, job)
    _until(lambda: _state(job) == JobState.RUNNING, 5, "the new active watcher writes")


class _Sink:
    def __init__(self):
        self.replaced, self.events = [], []

    def replace(self, kind, items, arrived):
        self.replaced.append([o["metadata"]["name"] for o in items])

    def event(self, kind, event_type, obj, arrived):
        self.events.append((event_type, obj["metadata"]["name"]))


def test_an_expired_resource_version_is_relisted(sandbox):
    client = kube.client_for(kube.Connection(mode="sandbox", server=sandbox.url, context=""))
    sandbox.store._history_size = 3
    for i in range(6):
        client.apply({"apiVersion": "v1", "kind": "ResourceQuota",
                      "metadata": {"name": f"q{i}", "namespace": "default"}, "spec": {"hard": {"pods": "1"}}})
    stop, sink = threading.Event(), _Sink()
    informer = watch.Informer(client, ("v1", "ResourceQuota"), "", "", sink, stop)
    informer.resource_version = "1"  # resumed from a version the server no longer keeps
    thread = threading.Thread(target=informer.run, daemon=True)
    thread.start()
    _until(lambda: sink.replaced, 5, "a relist after 410")
    assert sink.replaced[0] == [f"q{i}" for i in range(6)] and informer.lists == 1
    client.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q9", "namespace": "default"},
                  "spec": {"hard": {"pods": "1"}}})
    _until(lambda: ("ADDED", "q9") in sink.events, 5, "the watch goes on from the list")
    stop.set()
    informer.close()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_an_owned_object_deleted_by_hand_nudges_reconcile_at_once(standalone, watchers, run_on_commit):
    from composition import reconcile
    from tenants.models import TeamNamespace

    world, _ = _world(standalone, run_on_commit)
    row = TeamNamespace.objects.get(team=world["team"])
    client = kube.client_for_cluster(world["cluster"])
    (limits,) = client.list("v1", "LimitRange", namespace=world["team"].namespace)
    watchers()
    watchers.in_sync()
    generation = TeamNamespace.objects.get(pk=row.pk).generation
    client.delete("v1", "LimitRange", limits["metadata"]["name"], world["team"].namespace)
    _until(lambda: TeamNamespace.objects.get(pk=row.pk).generation > generation, 2, "the deletion nudges reconcile")
    reconcile.team_namespace_reconcile(team_namespace_id=row.pk)  # what the nudged worker runs
    assert client.get("v1", "LimitRange", limits["metadata"]["name"], world["team"].namespace) is not None


def test_quota_status_reaches_the_recorded_in_use_without_a_sweep(standalone, watchers, run_on_commit):
    """What the quota controller and Kueue write while a job runs, then after it finishes, reaches the team's row."""
    from tenants.models import TeamNamespace

    world, _ = _world(standalone, run_on_commit)
    row = TeamNamespace.objects.get(team=world["team"])
    client = kube.client_for_cluster(world["cluster"])
    ns = world["team"].namespace
    (quota,) = client.list("v1", "ResourceQuota", namespace=ns)
    name, hard = quota["metadata"]["name"], (quota.get("status") or {}).get("hard") or quota["spec"]["hard"]
    gpu = next(k for k in hard if "/" in k and not k.startswith("limits."))
    watchers()
    watchers.in_sync()

    def used(units: int):
        client._call("PATCH", kube.path_for("v1", "ResourceQuota", ns, name) + "/status",
                     body={"status": {"hard": hard, "used": {gpu: str(units)}}},
                     content_type="application/merge-patch+json")

    used(1)
    resource = gpu.removeprefix("requests.")
    _until(lambda: TeamNamespace.objects.get(pk=row.pk).usage.get(resource) == 1, 2, "in use 1 reaches the row")
    used(0)
    _until(lambda: TeamNamespace.objects.get(pk=row.pk).usage.get(resource) == 0, 2, "in use 0 reaches the row")


def test_a_volcano_gangs_place_reaches_the_row_from_the_watchers_pods(watchers, run_on_commit):
    """Volcano v1.15.1 records a gang's HyperNode nowhere: the watcher derives it from the pods it watches (their
    nodeName) and the cluster's HyperNodes, and the row has it as soon as the gang is bound."""
    from sandbox import Sandbox

    _redis().delete(*(_redis().keys("gpu-portal:lease:watch-cluster-*") or ["none"]))
    with Sandbox(simulate=True, tick=0.1, simulation={"duration": 60, "startup": 0.5}) as sb:
        world = build_world(sb.url, "volcano", guaranteed=16, burst=0)
        cluster = world["cluster"]
        cluster.topology_levels = [{"name": "rack", "node_label": "example.com/rack"},
                                   {"name": "host", "node_label": "kubernetes.io/hostname"}]
        cluster.save()
        hypernodes = sb.store.kind("topology.volcano.sh/v1alpha1", "HyperNode")
        for rack, nodes in (("r1", ("n1",)), ("r2", ("n2", "n3"))):
            for node in nodes:
                sb.add_node(node, gpus=8, labels={"example.com/rack": rack, "kubernetes.io/hostname": node,
                                                  **world["flavor"].node_labels})
            sb.store.create(hypernodes, {
                "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                "metadata": {"name": f"rack-{rack}", "labels": {"example.com/rack": rack}},
                "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}}
                                                for n in nodes]}})
        watchers()
        watchers.in_sync()
        job = submit(world, run_on_commit, kind="batch", name="ring", workers=2, gpus_per_worker=8,
                     topology_level="rack")
        _until(lambda: Job.objects.get(pk=job.pk).placement.get("hypernode"), 10, "the gang's place reaches the row")
        assert Job.objects.get(pk=job.pk).placement == {"hypernode": "rack-r2",
                                                        "domains": [{"example.com/rack": "r2"}]}
    kube.forget_clients()


def test_a_workload_waiting_on_the_budget_check_is_decided_at_once(standalone, watchers, run_on_commit):
    """A team under an allowance it has not used up: a Workload that got quota waits on the portal's check; the
    watcher sees it and has the holds judged then, so the check is Ready without waiting for beat."""
    from billing import budgets
    from tests.factories import PlatformAdminFactory

    world, _ = _world(standalone, run_on_commit)
    budgets.allowance_set(actor=PlatformAdminFactory(), team=world["team"], flavor=world["flavor"], gpu_hours=100,
                          window_days=7)
    client = kube.client_for_cluster(world["cluster"])
    ns = world["team"].namespace
    watchers()
    watchers.in_sync()
    api = "kueue.x-k8s.io/v1beta2"
    client._call("POST", kube.path_for(api, "Workload", ns), body={
        "apiVersion": api, "kind": "Workload", "metadata": {"name": "by-hand", "namespace": ns},
        "spec": {"queueName": "default", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "image": "x"}]}}}]}})
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    client._call("PATCH", kube.path_for(api, "Workload", ns, "by-hand") + "/status", body={"status": {
        "admissionChecks": [{"name": "gpu-portal-budget", "state": "Pending", "message": "",
                             "lastTransitionTime": now}],
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                        "lastTransitionTime": now}],
        "admission": {"clusterQueue": "nlp", "podSetAssignments": [
            {"name": "main", "flavors": {"nvidia.com/gpu": world["flavor"].name}, "count": 1}]}}},
        content_type="application/merge-patch+json")

    def state():
        workload = client.get(api, "Workload", "by-hand", ns)
        return next(c["state"] for c in workload["status"]["admissionChecks"] if c["name"] == "gpu-portal-budget")

    _until(lambda: state() == "Ready", 5, "the watcher has the check decided")
