"""The queues' usage in their status, as Kueue's ClusterQueue reconciler and Volcano's scheduler session write it:
an admitted job shows in its queue while it runs and leaves it when it ends."""

from sandbox.tests.test_simulator import KUEUE, VOLCANO, get, kueue_job, kueue_setup, sb, step, vc_job, volcano_setup

__all__ = ["sb"]  # the fixture


def gpu_usage(status):
    return {(f["name"], r["name"]): (r["total"], r.get("borrowed")) for f in status["flavorsUsage"]
            for r in f["resources"] if r["name"] == "nvidia.com/gpu"}


def test_an_admitted_kueue_workload_shows_in_its_cluster_queues_usage_until_it_ends(sb):
    kueue_setup(sb, {"cq-a": ("team-a", 4, None, "pool"), "cq-b": ("team-b", 8, None, "pool")})
    kueue_job(sb, "team-a", "train", workers=2, gpus=4)  # 8 GPUs: 4 of its own, 4 borrowed from cq-b
    kueue_job(sb, "team-a", "huge", workers=4, gpus=8)  # 32: never fits the cohort's 12
    step(sb, 0)
    status = get(sb, KUEUE, "ClusterQueue", None, "cq-a")["status"]
    assert gpu_usage(status) == {("h100", "nvidia.com/gpu"): ("8", "4")}
    assert status["flavorsReservation"] == status["flavorsUsage"]
    assert [r for f in status["flavorsUsage"] if f["name"] == "cpu" for r in f["resources"]][0] == {
        "name": "cpu", "total": "2"}  # covered resources sorted by name; nothing borrowed, no `borrowed`
    assert (status["admittedWorkloads"], status["reservingWorkloads"], status["pendingWorkloads"]) == (1, 1, 1)
    idle = get(sb, KUEUE, "ClusterQueue", None, "cq-b")
    assert gpu_usage(idle["status"]) == {("h100", "nvidia.com/gpu"): ("0", None)}
    step(sb, 5)  # the pods start: nothing Kueue counts changes, so nothing is written
    assert get(sb, KUEUE, "ClusterQueue", None, "cq-b")["metadata"]["resourceVersion"] == \
        idle["metadata"]["resourceVersion"]
    step(sb, 105)
    status = get(sb, KUEUE, "ClusterQueue", None, "cq-a")["status"]
    assert gpu_usage(status) == {("h100", "nvidia.com/gpu"): ("0", None)}
    assert (status["admittedWorkloads"], status["pendingWorkloads"]) == (0, 1)


def test_a_volcano_queue_allocates_its_running_tasks_and_root_everything(sb):
    volcano_setup(sb, {"qa": (8, 8), "qb": (8, 8)})
    vc_job(sb, "team-a", "ddp", queue="qa", workers=2, gpus=4)
    step(sb, 0)
    allocated = {q: get(sb, VOLCANO, "Queue", None, q)["status"]["allocated"] for q in ("qa", "qb", "root")}
    assert allocated["qa"] == {"cpu": "2", "memory": "2147483648", "nvidia.com/gpu": "8"}
    assert allocated["root"] == allocated["qa"]
    assert allocated["qb"] == {"cpu": "0", "memory": "0"}
    step(sb, 5)
    step(sb, 105)
    assert get(sb, VOLCANO, "Queue", None, "qa")["status"]["allocated"] == {"cpu": "0", "memory": "0"}
