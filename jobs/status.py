"""What a job's pods say of it: when it started and where it runs. Its state is its scheduler's to read
(`Backend.observe`). Pure functions of the plain dicts read from the API server: no database, no clock.
"""

from collections import defaultdict
from dataclasses import dataclass

from backends.observe import condition


@dataclass(frozen=True)
class JobPods:
    started: str | None = None  # when its first pod started running
    nodes: frozenset[str] = frozenset()  # the nodes its pods were bound to


def pods_by_job(pods, job_label: str) -> dict[str, JobPods]:
    """Per job id (the pods' `job_label`), when its first pod started and the nodes its pods are bound to."""
    starts: dict[str, list[str]] = defaultdict(list)
    nodes: dict[str, set[str]] = defaultdict(set)
    for pod in pods:
        job_id = (pod["metadata"].get("labels") or {}).get(job_label)
        if not job_id:
            continue
        when, node = pod_start_time(pod), (pod.get("spec") or {}).get("nodeName")
        starts[job_id] += [when] if when else []
        nodes[job_id] |= {node} if node else set()
    return {job_id: JobPods(min(starts[job_id], default=None), frozenset(nodes[job_id])) for job_id in nodes}


def pod_start_time(pod: dict) -> str | None:
    """When a pod's containers started running: the earliest container `startedAt` (running or since
    terminated), else the time it became Ready. None for a pod that has not run."""
    status = pod.get("status") or {}
    times = []
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        started = (state.get("running") or state.get("terminated") or {}).get("startedAt")
        if started:
            times.append(started)
    if times:
        return min(times)
    ready = condition(pod, "Ready")
    return ready.get("lastTransitionTime") if ready.get("status") == "True" else None
