"""One status writer per workload kind: what the Job controller, Volcano's job controller and KubeRay write on
the job object itself as it is queued, admitted, started, finished or evicted, and how each names its pods."""

from __future__ import annotations

from .model import BATCH_JOB, RAYJOB, VCJOB, Objects, PodSet, Tracked, condition, iso, pod_requests, set_conditions

# KubeRay's submitter Job in K8sJobMode (the CRD's default submissionMode): KubeRay gives its container these
# resources (ray-operator/controllers/ray/common/job.go GetDefaultSubmitterContainer, v1.7.0), and Kueue counts it
# as a pod set of its own (pkg/controller/jobs/rayjob/rayjob_controller.go addSubmitterPodSet).
SUBMITTER_TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [{
    "name": "ray-job-submitter", "image": "rayproject/ray",
    "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}}


class Writer:
    kind: tuple[str, str]

    def __init__(self, objects: Objects):
        self.objects = objects

    def pod_sets(self, spec: dict) -> list[PodSet]:
        raise NotImplementedError

    def priority_class(self, labels: dict, spec: dict) -> str:
        return ((spec.get("template") or {}).get("spec") or {}).get("priorityClassName", "")

    def deadline(self, spec: dict) -> float | None:
        value = spec.get("activeDeadlineSeconds")
        return float(value) if value else None

    def min_available(self, spec: dict) -> int:
        return 0

    def done(self, status: dict) -> bool:
        return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for c in status.get("conditions") or [])

    def status(self, job: Tracked, status: dict) -> None:
        self.objects.patch_status(job.api_version, job.kind[1], job.namespace, job.name, status)

    def created(self, job: Tracked, now: float) -> None:
        """Nothing until the scheduler admits it."""

    def admitted(self, job: Tracked, now: float) -> None:
        raise NotImplementedError

    def running(self, job: Tracked, now: float) -> None:
        raise NotImplementedError

    def finished(self, job: Tracked, now: float, outcome: str, message: str) -> None:
        raise NotImplementedError

    def evicted(self, job: Tracked, now: float, message: str) -> None:
        raise NotImplementedError

    def pod_name(self, job: Tracked, pod_set: PodSet, index: int, suffix: str) -> str:
        raise NotImplementedError

    def pod_metadata(self, job: Tracked, pod_set: PodSet, index: int, labels: dict, annotations: dict) -> None:
        """Add the labels and annotations the kind's controller puts on its pods."""


class BatchJobWriter(Writer):
    """batch/v1 Job: the Job controller's status (startTime, active/ready, Complete/Failed with
    SuccessCriteriaMet/FailureTarget first, as kube-controller-manager's job controller does)."""

    kind = BATCH_JOB

    def pod_sets(self, spec):
        template = spec.get("template") or {}
        return [PodSet("main", int(spec.get("parallelism", 1)), template, pod_requests(template))]

    def admitted(self, job, now):
        self.status(job, {"startTime": iso(now), "active": job.pod_count, "ready": 0, "terminating": 0})

    def running(self, job, now):
        self.status(job, {"ready": job.pod_count})

    def finished(self, job, now, outcome, message):
        succeeded, count = outcome == "succeed", job.pod_count
        if outcome == "deadline":
            reason, message = "DeadlineExceeded", "Job was active longer than specified deadline"
        elif not succeeded:
            reason, message = "BackoffLimitExceeded", message or "Job has reached the specified backoff limit"
        else:
            reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
        conditions = self.objects.conditions(job.api_version, "Job", job.namespace, job.name)
        if succeeded:
            updates = [condition("SuccessCriteriaMet", True, reason, message, now),
                       condition("Complete", True, reason, message, now)]
            status = {"succeeded": count, "completionTime": iso(now),
                      "completedIndexes": f"0-{count - 1}" if count > 1 else "0"}
        else:
            updates = [condition("FailureTarget", True, reason, message, now),
                       condition("Failed", True, reason, message, now)]
            status = {"failed": 1 if outcome != "deadline" else count}
        for update in updates:
            update.pop("observedGeneration")
        self.status(job, {**status, "active": 0, "ready": 0, "conditions": set_conditions(conditions, *updates)})

    def evicted(self, job, now, message):
        self.status(job, {"active": 0, "ready": 0, "startTime": None})

    def pod_name(self, job, pod_set, index, suffix):
        return f"{job.name}-{index}-{suffix}"

    def pod_metadata(self, job, pod_set, index, labels, annotations):
        labels.update({"batch.kubernetes.io/job-name": job.name, "job-name": job.name,
                       "batch.kubernetes.io/controller-uid": job.uid,
                       "batch.kubernetes.io/job-completion-index": str(index)})
        annotations["batch.kubernetes.io/job-completion-index"] = str(index)


class VcjobWriter(Writer):
    """Volcano's batch Job: `status.state.phase` Pending → Running → Completed/Failed, pods named
    `<job>-<task>-<index>` (pkg/controllers/job/job_controller_util.go MakePodName)."""

    kind = VCJOB

    def pod_sets(self, spec):
        return [PodSet(t.get("name", f"default{i}"), int(t.get("replicas", 1)), t.get("template") or {},
                       pod_requests(t.get("template") or {}),
                       min_count=t.get("minAvailable")) for i, t in enumerate(spec.get("tasks") or [])]

    def priority_class(self, labels, spec):
        return spec.get("priorityClassName", "")

    def deadline(self, spec):
        value = spec.get("activeDeadlineSeconds") or ((spec.get("tasks") or [{}])[0].get("template", {})
                                                     .get("spec", {}).get("activeDeadlineSeconds"))
        return float(value) if value else None

    def min_available(self, spec):
        # The job's minAvailable, defaulted by Volcano's admission to the sum of the tasks' replicas.
        return int(spec.get("minAvailable") or sum(int(t.get("replicas", 1)) for t in spec.get("tasks") or []))

    def done(self, status):
        return (status.get("state") or {}).get("phase") in ("Completed", "Failed", "Aborted", "Terminated")

    def phase(self, job: Tracked, phase: str, now: float, reason: str = "", message: str = "", **counts) -> None:
        state = {"phase": phase, "lastTransitionTime": iso(now)}
        if reason:
            state["reason"] = reason
        if message:
            state["message"] = message
        self.status(job, {"state": state, "minAvailable": job.min_available or job.pod_count, **counts})

    def created(self, job, now):
        self.phase(job, "Pending", now)

    def admitted(self, job, now):
        self.phase(job, "Pending", now, pending=len([p for p in job.pods if p]))

    def running(self, job, now):
        self.phase(job, "Running", now, running=len([p for p in job.pods if p]), pending=0)

    def finished(self, job, now, outcome, message):
        succeeded, count = outcome == "succeed", len([p for p in job.pods if p]) or job.pod_count
        reason = ""
        if outcome == "deadline":
            reason, message = "DeadlineExceeded", "Job was active longer than specified deadline"
        elif not succeeded:
            first = next((p for p in job.pods if p), job.name)
            reason, message = "PodFailed", message or f"pod {first} failed with exit code 1"
        self.phase(job, "Completed" if succeeded else "Failed", now, reason, "" if succeeded else message,
                   running=0, **({"succeeded": count} if succeeded else {"failed": count}))

    def evicted(self, job, now, message):
        """The job controller's restart under the job's PodEvicted → RestartJob policy (pkg/controllers/job/state
        running.go, restarting.go): Restarting with retryCount + 1, then Pending once its pods are gone, with no
        reason and no message; what evicted it is told only by the scheduler's Events (`evict_events`)."""
        current = self.objects.get(job.api_version, "Job", job.namespace, job.name) or {}
        retries = ((current.get("status") or {}).get("retryCount") or 0) + 1
        self.status(job, {"state": {"phase": "Pending", "lastTransitionTime": iso(now), "reason": None,
                                    "message": None},
                          "minAvailable": job.min_available or job.pod_count, "running": 0,
                          "pending": job.pod_count, "retryCount": retries})

    def pod_name(self, job, pod_set, index, suffix):
        return f"{job.name}-{pod_set.name}-{index}"

    def pod_metadata(self, job, pod_set, index, labels, annotations):
        labels.update({"volcano.sh/job-name": job.name, "volcano.sh/task-spec": pod_set.name,
                       "volcano.sh/queue-name": job.queue})
        annotations.update({"scheduling.k8s.io/group-name": job.scheduler_object,
                            "volcano.sh/task-index": str(index)})


class RayJobWriter(Writer):
    """KubeRay's RayJob: jobDeploymentStatus Suspended/Initializing/Running/Complete, a RayCluster named
    `<job>-<5 chars>`, head and worker pods; the submitter Job it creates in K8sJobMode is counted for quota."""

    kind = RAYJOB

    def pod_sets(self, spec):
        cluster = spec.get("rayClusterSpec") or {}
        head = (cluster.get("headGroupSpec") or {}).get("template") or {}
        sets = [PodSet("head", 1, head, pod_requests(head))]
        for group in cluster.get("workerGroupSpecs") or []:
            template = group.get("template") or {}
            sets.append(PodSet(group["groupName"], int(group.get("replicas", 0)), template, pod_requests(template)))
        if spec.get("submissionMode", "K8sJobMode") == "K8sJobMode":
            template = spec.get("submitterPodTemplate") or SUBMITTER_TEMPLATE
            sets.append(PodSet("submitter", 1, template, pod_requests(template), creates_pods=False))
        return sets

    def priority_class(self, labels, spec):
        return labels.get("ray.io/priority-class-name", "")

    def done(self, status):
        return status.get("jobDeploymentStatus") in ("Complete", "Failed")

    def created(self, job, now):
        if job.backend == "kueue":
            self.status(job, {"jobDeploymentStatus": "Suspended", "jobStatus": ""})

    def admitted(self, job, now):
        self.status(job, {
            "jobDeploymentStatus": "Initializing", "jobStatus": "", "rayClusterName": job.cluster_name,
            "jobId": f"{job.name}-{job.cluster_name.rsplit('-', 1)[-1]}", "startTime": iso(now),
            "dashboardURL": f"{job.cluster_name}-head-svc.{job.namespace}.svc.cluster.local:8265"})

    def running(self, job, now):
        self.status(job, {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
                          "rayJobInfo": {"startTime": iso(now)}})

    def finished(self, job, now, outcome, message):
        succeeded = outcome == "succeed"
        if outcome == "deadline":
            message = "Job was active longer than specified deadline"
        reason = "" if succeeded else ("DeadlineExceeded" if outcome == "deadline" else "AppFailed")
        status = {"jobDeploymentStatus": "Complete" if succeeded or outcome != "deadline" else "Failed",
                  "jobStatus": "SUCCEEDED" if succeeded else "FAILED", "endTime": iso(now),
                  "succeeded" if succeeded else "failed": 1}
        if reason:
            status.update(reason=reason, message=message or "Job has reached the specified backoff limit")
        self.status(job, status)

    def evicted(self, job, now, message):
        if job.backend == "kueue":
            self.status(job, {"jobDeploymentStatus": "Suspended", "jobStatus": "", "startTime": None})
        else:
            self.status(job, {"jobDeploymentStatus": "Suspended", "jobStatus": "", "reason": "Preempted",
                              "message": message})

    def pod_name(self, job, pod_set, index, suffix):
        role = "head" if pod_set.name == "head" else f"{pod_set.name}-worker"
        return f"{job.cluster_name or job.name}-{role}-{suffix}"

    def pod_metadata(self, job, pod_set, index, labels, annotations):
        labels.update({"ray.io/cluster": job.cluster_name,
                       "ray.io/node-type": "head" if pod_set.name == "head" else "worker",
                       "ray.io/group": "headgroup" if pod_set.name == "head" else pod_set.name})


def writers(objects: Objects) -> dict[tuple[str, str], Writer]:
    return {w.kind: w(objects) for w in (BatchJobWriter, VcjobWriter, RayJobWriter)}
