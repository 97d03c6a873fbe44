"""A job's end (failed, preempted, cancelled) in words a person reads first; the scheduler's raw message follows.

Pure functions of the job's state and the message the cluster gave, so the page and the notification say the same.
"""

from __future__ import annotations

import re

from .choices import JobState

# Kueue's preemption message and its reasons in words (pkg/scheduler/preemption/preemption.go, v0.19.2:
# "Preempted to accommodate a workload (UID: …, JobUID: …) due to <reason>; preemptor path: …").
_KUEUE_PREEMPTED = re.compile(
    r"Preempted to accommodate a (?:higher priority )?workload.*?(?:due to (?P<reason>[^;]+))?(?:;|$)", re.I | re.S)
_KUEUE_REASONS = {
    "prioritization in the ClusterQueue": "a higher-priority job of the same team needed the GPUs",
    "reclamation within the cohort": "another team took back the guaranteed quota this job was borrowing",
    "reclamation within the cohort while borrowing": "another team took back the guaranteed quota this job was "
                                                     "borrowing",
    "Fair Sharing within the cohort": "fair sharing gave the GPUs to a team that had used less",
}
# Volcano evicts with the reason "preempt" (same queue, priority) or "reclaim" (another queue takes its share back)
# (pkg/scheduler/actions/preempt/preempt.go and reclaim/reclaim.go, v1.15.1); the sync words it
# "Evicted by <reason> to schedule <namespace>/<name>".
_VOLCANO_PREEMPTED = re.compile(r"Evicted by (?P<how>preempt|reclaim)\w* to schedule (?P<who>\S+)", re.I)
# Kueue evicts a workload whose assigned nodes are gone and cannot be replaced (pkg/scheduler/scheduler.go,
# evictWorkloadAfterFailedTASReplacement, v0.19.2): on spot capacity, its provider taking the nodes back.
_NODES_LOST = re.compile(r"no replacement for unhealthy node\(s\): (?P<nodes>\S+)", re.I)
_EXIT = re.compile(r"pod (?P<pod>\S+) failed with exit code (?P<code>\d+)", re.I)
_BACKOFF = re.compile(r"BackoffLimitExceeded", re.I)
_DEADLINE = re.compile(r"DeadlineExceeded|active deadline", re.I)
_OOM = re.compile(r"OOMKilled", re.I)
# The API server's answer when it refuses to create an object for good (portal/kube.py KubeError: "<code> <reason>:
# <message>"); an admission webhook's words follow "denied the request:" (k8s.io/apiserver
# pkg/admission/plugin/webhook/errors/statuserror.go).
_REFUSED = re.compile(r"^(?:400|403|404|409|422) \w+: (?:admission webhook \"(?P<hook>[^\"]+)\" denied the request: )?"
                      r"(?P<why>.*)$", re.S)


# A preempted job is not over: Kueue requeues its evicted Workload and Volcano restarts its vcjob (see status.py),
# so the page offers Cancel, not Resubmit, and says so.
REQUEUED = "It queues again by itself and restarts when the GPUs are free; cancel it if it is no longer needed."


def _preempted(message: str) -> str:
    lost = _NODES_LOST.search(message)
    if lost:
        return (f"Evicted: the nodes it ran on ({lost['nodes']}) went away, as spot capacity does when its provider "
                "takes it back. It queues again and starts over on whatever capacity is free (reserved first).")
    volcano = _VOLCANO_PREEMPTED.search(message)
    if volcano and volcano["how"].lower() == "reclaim":
        return f"Preempted: another team took back the quota this job was borrowing, for {volcano['who']}. " \
               f"{REQUEUED}"
    if volcano:
        return f"Preempted: the scheduler stopped this job to make room for {volcano['who']}, which has a higher " \
               f"priority. {REQUEUED}"
    kueue = _KUEUE_PREEMPTED.search(message)
    if kueue:
        why = _KUEUE_REASONS.get((kueue["reason"] or "").strip())
        if why:
            return f"Preempted: {why}. {REQUEUED}"
    return f"Preempted: a higher-priority job needed the GPUs. {REQUEUED}"


def _failed(message: str) -> str:
    refused = _REFUSED.match(message)
    if refused:
        by = f"its admission policy ({refused['hook']})" if refused["hook"] else "its API server"
        return f"Refused: the cluster would not create this job; {by} said: {refused['why']}. It never ran. " \
               "Change what it names and submit it again."
    if _OOM.search(message):
        return "Failed: a container ran out of memory. Ask for more memory per worker and resubmit."
    exit_code = _EXIT.search(message)
    if exit_code:
        return f"Failed: the program in pod {exit_code['pod']} exited with code {exit_code['code']}. Its log " \
               "below shows why."
    if _BACKOFF.search(message):
        return "Failed: the job's pods kept failing until its retry limit was reached. The pod logs below show why."
    if _DEADLINE.search(message):
        return "Failed: the job ran longer than its maximum run time and was stopped."
    return "Failed. The scheduler's message and the pod logs below say more."


def explain(state: str, message: str) -> str:
    """The sentence that leads a failed or preempted job's page; empty for other states."""
    if state == JobState.PREEMPTED:
        return _preempted(message or "")
    if state == JobState.FAILED:
        return _failed(message or "")
    return ""
