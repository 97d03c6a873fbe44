import pytest

from backends.kueue import kueue_batch_job
from backends.observe import ray_job
from backends.volcano import volcano_job, volcano_ray_job
from jobs.choices import JobState
from jobs.outcome import REQUEUED, explain

T0, T1 = "2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z"


def cond(kind, status="True", reason="", message="", time=T1):
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": time}


def wl(*conditions):
    return {"status": {"conditions": list(conditions)}}


TIMED_OUT = "Exceeded the PodsReady timeout nlp/job-train-1-3f2a1"
INSUFFICIENT = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
                "h100, 8 more needed")


@pytest.mark.parametrize(
    ("job", "workload", "state", "message"),
    [
        ({"spec": {"suspend": True}}, None, JobState.QUEUED, ""),
        ({"spec": {"suspend": True}}, wl(cond("QuotaReserved", "False", "Pending", INSUFFICIENT)), JobState.QUEUED,
         INSUFFICIENT),
        ({"spec": {"suspend": False}, "status": {}}, wl(cond("QuotaReserved"), cond("Admitted")), JobState.ADMITTED,
         ""),
        ({"spec": {"suspend": False}, "status": {"active": 2, "startTime": T0}}, wl(cond("Admitted")),
         JobState.RUNNING, ""),
        ({"spec": {"suspend": False}, "status": {"active": 2, "ready": 0, "startTime": T0}}, wl(cond("Admitted")),
         JobState.ADMITTED, ""),
        ({"spec": {"suspend": False}, "status": {"active": 2, "ready": 2, "startTime": T0}}, wl(cond("Admitted")),
         JobState.RUNNING, ""),
        ({"spec": {"suspend": False}, "status": {"active": 1, "ready": 1}},
         wl(cond("Admitted"), cond("Evicted", "False", "QuotaReserved", "Previously: evicted")), JobState.RUNNING,
         ""),
        ({"spec": {}, "status": {"startTime": T0, "completionTime": T1, "conditions": [cond("Complete")]}}, None,
         JobState.SUCCEEDED, ""),
        ({"spec": {}, "status": {"conditions": [cond("Failed", reason="DeadlineExceeded",
                                                      message="Job was active longer than specified deadline")]}},
         None, JobState.FAILED, "DeadlineExceeded: Job was active longer than specified deadline"),
        ({"spec": {"suspend": True}}, wl(cond("Evicted", reason="Preempted", message="Preempted to accommodate a "
                                              "higher priority Workload")), JobState.PREEMPTED,
         "Preempted to accommodate a higher priority Workload"),
        # waitForPodsReady (on by default since Kueue v0.19): evicted for pods not ready in time, it waits again.
        ({"spec": {"suspend": True}}, wl(cond("Evicted", reason="PodsReadyTimeout", message=TIMED_OUT),
                                         cond("QuotaReserved", "False", "PodsReadyTimeout", TIMED_OUT)),
         JobState.QUEUED, TIMED_OUT),
        ({"spec": {"suspend": False}, "status": {"active": 1, "ready": 1}},
         wl(cond("Admitted"), cond("Evicted", "False", "QuotaReserved", "Previously: evicted"),
            cond("PodsReady", reason="Started")), JobState.RUNNING, ""),
    ],
)
def test_kueue_batch_job(job, workload, state, message):
    observed = kueue_batch_job(job, workload)
    assert (observed.state, observed.message) == (state, message)


def test_kueue_timestamps():
    observed = kueue_batch_job({"status": {"startTime": T0, "completionTime": T1,
                                           "conditions": [cond("Complete")]}}, None)
    assert (observed.started_at, observed.finished_at, observed.admitted) == (T0, T1, True)


def vc(phase, **extra):
    return {"status": {"state": {"phase": phase, "lastTransitionTime": T1, **extra}}}


@pytest.mark.parametrize(
    ("job", "podgroup", "state"),
    [
        (vc("Pending"), {"status": {"phase": "Pending", "conditions": [cond("Unschedulable", message="0/4 nodes")]}},
         JobState.QUEUED),
        (vc("Pending"), {"status": {"phase": "Inqueue"}}, JobState.ADMITTED),
        (vc("Running"), None, JobState.RUNNING),
        (vc("Completed"), None, JobState.SUCCEEDED),
        (vc("Failed"), None, JobState.FAILED),
        (vc("Aborted", reason="Preempted"), None, JobState.PREEMPTED),
        # Volcano's job controller writes no reason on a restarted job: only retryCount says it was evicted.
        (vc("Pending", reason="PodEvicted"), {"status": {"phase": "Pending"}}, JobState.QUEUED),
        ({}, None, JobState.QUEUED),
    ],
)
def test_volcano_job(job, podgroup, state):
    assert volcano_job(job, podgroup).state == state


@pytest.mark.parametrize(("evicted_by", "message", "sentence"), [
    ("reclaim", "Volcano reclaimed its GPUs for a queue below its guaranteed share and restarted it (restart 2).",
     "Preempted: Volcano reclaimed its GPUs for a queue below its guaranteed share; this job's team held more than "
     "its own share."),
    ("preempt", "Volcano preempted it for higher-priority work and restarted it (restart 2).",
     "Preempted: Volcano evicted its pods to make room for higher-priority work in its queue."),
    ("", "Its pods were evicted and Volcano restarted it (restart 2).",
     "Preempted: Volcano evicted its pods to make room for another job"),
])
def test_a_restarted_volcano_job_says_which_action_evicted_it(evicted_by, message, sentence):
    """The PodGroup's latest Evict Event names the action (pkg/scheduler/cache/cache.go SchedulerCache.Evict), never
    the job it made room for; without one the page says only that the pods were evicted."""
    restarted = {"status": {"retryCount": 2, **vc("Pending")["status"]}}
    observed = volcano_job(restarted, {"status": {"phase": "Pending"}}, REFUSED, evicted_by)
    assert (observed.state, observed.message) == (JobState.PREEMPTED, f"{message} {REFUSED}")
    assert explain(observed.state, observed.message).startswith(sentence)
    assert explain(observed.state, observed.message).endswith(REQUEUED)


def test_a_volcano_job_restarted_after_an_eviction_is_preempted_until_placed_again():
    """Volcano's job controller restarts a job whose pod was evicted (`retryCount`), with no reason: preempted while
    it waits, in the gang's words; once placed again it is admitted as any other."""
    waiting = {"status": {"phase": "Inqueue", "conditions": [cond("Unschedulable", "True", "NotEnoughResources",
                                                                  GANG)]}}
    restarted = {"status": {"retryCount": 1, **vc("Pending")["status"]}}
    observed = volcano_job(restarted, waiting)
    assert (observed.state, observed.message) == (
        JobState.PREEMPTED, f"Its pods were evicted and Volcano restarted it (restart 1). {GANG}")
    assert explain(observed.state, observed.message).startswith(
        "Preempted: Volcano evicted its pods to make room for another job")
    assert volcano_job({"status": {"retryCount": 1, **vc("Restarting")["status"]}}, None).state == \
        JobState.PREEMPTED
    assert volcano_job(restarted, {"status": {"phase": "Inqueue"}}).state == JobState.ADMITTED
    assert volcano_job({"status": {"retryCount": 1, **vc("Running")["status"]}}, None).state == JobState.RUNNING


GANG = ("2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; Pending: "
        "2 Unschedulable")
REFUSED = "queue resource quota insufficient: insufficient nvidia.com/gpu"


@pytest.mark.parametrize(
    ("podgroup", "refusal", "state", "message"),
    [
        # Enqueue refused (proportion/capacity): the PodGroup stays Pending; Volcano says why only in an Event.
        ({"status": {"phase": "Pending"}}, REFUSED, JobState.QUEUED, REFUSED),
        # Enqueued but the gang cannot be placed (gang.go OnSessionClose): still waiting, in the gang's words.
        ({"status": {"phase": "Inqueue", "conditions": [cond("Unschedulable", "True", "NotEnoughResources", GANG)]}},
         "", JobState.QUEUED, GANG),
        # An old refusal is moot once the PodGroup is enqueued.
        ({"status": {"phase": "Inqueue"}}, REFUSED, JobState.ADMITTED, ""),
        # Placed since: gang writes Scheduled and leaves the old Unschedulable as it was (pods still starting).
        ({"status": {"phase": "Inqueue", "conditions": [
            cond("Unschedulable", "True", "NotEnoughResources", GANG, time=T0),
            cond("Scheduled", "True", "tasks in gang are ready to be scheduled", time=T1)]}},
         "", JobState.ADMITTED, ""),
        # Unschedulable again after it was placed (newer than its Scheduled): waiting.
        ({"status": {"phase": "Inqueue", "conditions": [
            cond("Scheduled", "True", "tasks in gang are ready to be scheduled", time=T0),
            cond("Unschedulable", "True", "NotEnoughResources", GANG, time=T1)]}},
         "", JobState.QUEUED, GANG),
    ],
)
def test_volcano_says_why_a_job_waits_in_volcanos_words(podgroup, refusal, state, message):
    observed = volcano_job(vc("Pending"), podgroup, refusal)
    assert (observed.state, observed.message) == (state, message)


@pytest.mark.parametrize(
    ("status", "spec", "state"),
    [
        ({}, {"suspend": True}, JobState.QUEUED),
        ({"jobDeploymentStatus": "Initializing"}, {}, JobState.ADMITTED),
        ({"jobDeploymentStatus": "Suspended", "reason": "Preempted"}, {}, JobState.PREEMPTED),
        ({"jobDeploymentStatus": "Suspended"}, {"suspend": True}, JobState.QUEUED),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "startTime": T0}, {}, JobState.RUNNING),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "endTime": T1}, {}, JobState.SUCCEEDED),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED", "reason": "AppFailed"}, {}, JobState.FAILED),
        ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}, {}, JobState.FAILED),
        ({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed", "message": "bad"}, {},
         JobState.FAILED),
    ],
)
def test_ray_job(status, spec, state):
    assert ray_job({"spec": spec, "status": status}).state == state


def test_a_rayjob_evicted_by_the_pods_ready_timeout_waits_again():
    observed = ray_job({"spec": {"suspend": True}, "status": {"jobDeploymentStatus": "Suspended"}},
                       wl(cond("Evicted", reason="PodsReadyTimeout", message=TIMED_OUT)))
    assert (observed.state, observed.message) == (JobState.QUEUED, TIMED_OUT)


RAY_REFUSED = "queue resource quota insufficient: insufficient cpu"


@pytest.mark.parametrize(
    ("status", "podgroup", "refusal", "state", "message"),
    [
        # KubeRay marks the RayJob Initializing and makes its pods at once; Volcano has not let the PodGroup in.
        ({"jobDeploymentStatus": "Initializing"}, {"status": {"phase": "Pending"}}, RAY_REFUSED, JobState.QUEUED,
         RAY_REFUSED),
        # Let in, but the gang has no room on the nodes yet.
        ({"jobDeploymentStatus": "Initializing"},
         {"status": {"phase": "Inqueue", "conditions": [cond("Unschedulable", "True", "NotEnoughResources", GANG)]}},
         "", JobState.QUEUED, GANG),
        # Placed: the RayJob says the rest.
        ({"jobDeploymentStatus": "Running"}, {"status": {"phase": "Running", "conditions": [
            cond("Unschedulable", "True", "NotEnoughResources", GANG, time=T0), cond("Scheduled", time=T1)]}},
         RAY_REFUSED, JobState.ADMITTED, ""),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, {"status": {"phase": "Running"}}, "",
         JobState.RUNNING, ""),
        # No PodGroup (KubeRay without its Volcano plugin): only the RayJob speaks.
        ({"jobDeploymentStatus": "Initializing"}, None, "", JobState.ADMITTED, ""),
        # Over: the PodGroup KubeRay shrinks at the end does not matter.
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, {"status": {"phase": "Pending"}}, "",
         JobState.SUCCEEDED, ""),
    ],
)
def test_a_rayjob_under_volcano_waits_while_its_podgroup_does(status, podgroup, refusal, state, message):
    observed = volcano_ray_job({"spec": {}, "status": status}, podgroup, refusal)
    assert (observed.state, observed.message) == (state, message)
