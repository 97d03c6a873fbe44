"""The sandbox's job simulator: a step's cost as finished jobs pile up, and the CPU a 1,000-job queue takes to be
admitted, for Kueue and for Volcano. Everything runs in this process (no HTTP): the simulator's own work and the
store writes it makes (Workload/PodGroup, job and pod statuses, pods), told apart by the simulator's CPU counters."""

import time

from bench.support import median, table

KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
QUEUED = 1000


def _world(sb, backend: str, gpus: int) -> None:
    store = sb.store
    store.create(store.kind("v1", "Namespace"), {"metadata": {"name": "team"}})
    if backend == "kueue":
        store.create(store.kind(KUEUE, "ResourceFlavor"), {"metadata": {"name": "h100"}, "spec": {}})
        store.create(store.kind(KUEUE, "ClusterQueue"), {"metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]}]}]}})
        store.create(store.kind(KUEUE, "LocalQueue"),
                     {"metadata": {"name": "default", "namespace": "team"}, "spec": {"clusterQueue": "cq"}})
    else:
        amount = {"nvidia.com/gpu": str(gpus)}
        store.create(store.kind(VOLCANO, "Queue"), {"metadata": {"name": "team"}, "spec": {
            "weight": 1, "capability": amount, "deserved": amount, "guarantee": {"resource": amount}}})


def _job(sb, backend: str, name: str, annotations=None, gpus: int = 1) -> None:
    store = sb.store
    template = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    meta = {"name": name, "namespace": "team", "annotations": annotations or {}}
    if backend == "kueue":
        meta["labels"] = {"kueue.x-k8s.io/queue-name": "default"}
        store.create(store.kind("batch/v1", "Job"), {"metadata": meta, "spec": {"parallelism": 1,
                                                                                "template": template}})
    else:
        store.create(store.kind("batch.volcano.sh/v1alpha1", "Job"), {"metadata": meta, "spec": {
            "queue": "team", "minAvailable": 1, "tasks": [{"name": "main", "replicas": 1, "template": template}]}})


def _step_cost(backend: str, finished: int) -> float:
    """Median time of a step with 20 jobs running and 20 waiting (each wants 11 of the 30 GPUs, 10 being free),
    after `finished` jobs ran through the simulator, 25 at a time."""
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=None, simulation={"duration": 0, "startup": 0}) as sb:
        _world(sb, backend, 30)
        sim = sb.simulator
        for i in range(finished):
            _job(sb, backend, f"done-{i}")
            if i % 25 == 24:
                sim.step(1.0 * i)
                sim.step(1.0 * i + 0.5)
        sim.step(1e6)
        sim.step(1e6 + 0.5)
        assert not sim.jobs(), "every job of the history has finished"
        for i in range(20):
            _job(sb, backend, f"live-{i}", {"sandbox.gpu-portal.io/duration-seconds": "1e9"})
        sim.step(1e6 + 1)
        for i in range(20):
            _job(sb, backend, f"wait-{i}", gpus=11)
        sim.step(1e6 + 1.5)
        assert sorted(j["state"] for j in sim.jobs()) == ["pending"] * 20 + ["running"] * 20
        times = []
        for i in range(50):
            started = time.perf_counter()
            sim.step(1e6 + 2 + i)
            times.append(time.perf_counter() - started)
        return median(times)


def _admission(backend: str, gpus: int) -> dict:
    """CPU of the one step that meets a queue of 1,000 new jobs, with `gpus` of quota for them."""
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=None, simulation={"duration": 1e9, "startup": 0}) as sb:
        _world(sb, backend, gpus)
        for i in range(QUEUED):
            _job(sb, backend, f"job-{i}")
        sim = sb.simulator
        before = sim.cpu()
        sim.step(1.0)
        after = sim.cpu()
        admitted = sum(1 for j in sim.jobs() if j["state"] != "pending")
        sim.step(2.0)  # the admitted pods start
        again = time.process_time()
        sim.step(3.0)
        steady = time.process_time() - again
        return {name: after[name] - before[name] for name in after} | {"admitted": admitted, "steady": steady}


def run() -> str:
    steps, admissions = [], []
    for backend in ("kueue", "volcano"):
        empty, loaded = _step_cost(backend, 0), _step_cost(backend, 2000)
        steps.append([backend, f"{empty * 1e6:.0f} µs", f"{loaded * 1e6:.0f} µs", f"**{loaded / empty:.2f}×**"])
        for gpus, label in ((QUEUED, "all fit"), (QUEUED // 2, "half fit")):
            cpu = _admission(backend, gpus)
            admissions.append([backend, label, f"{cpu['admitted']:,}", f"**{cpu['scheduling']:.3f} s**",
                               f"{cpu['writes']:.2f} s", f"{cpu['steps']:.2f} s", f"{cpu['steady'] * 1e3:.1f} ms"])
    return (
        "## Sandbox job simulator\n\n"
        "### Step cost (target: flat as finished jobs pile up)\n\n"
        "20 jobs running and 20 waiting for quota (so every step runs the scheduler); the history is jobs that ran "
        "and finished through the same simulator.\n\n"
        + table(["scheduler", "no history", "after 2,000 finished jobs", "ratio"], steps)
        + f"\n\n### A queue of {QUEUED:,} one-GPU jobs (target: the scheduler's CPU under 1 s)\n\n"
        "CPU of the one step that first meets the queue. *scheduling* is the simulator's own work (quota tree, "
        "flavor assignment, gang checks, reads); *writes* is the store's (validated creates and patches of "
        "Workloads/PodGroups, job and pod statuses, pods). *Steady step*: a later step with nothing changed, "
        "the cost of the jobs left waiting or running.\n\n"
        + table(["scheduler", "quota", "admitted", "scheduling CPU", "writes CPU", "step CPU", "steady step"],
                admissions)
        + "\n"
    )
