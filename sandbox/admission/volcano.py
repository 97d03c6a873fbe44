"""Volcano's admission webhooks for jobs.

- pkg/webhooks/admission/jobs/mutate/mutate_job.go (on create): queue "default", schedulerName "volcano",
  maxRetry 3 when 0, tasks named "default<i>", each task's minAvailable = replicas and maxRetry 3, the job's
  minAvailable = the tasks' sum, the svc plugin for tensorflow/mpi/pytorch/ray and ssh for mpi.
- pkg/webhooks/admission/jobs/validate/admit_job.go and util.go (validatejob.volcano.sh): at least one task,
  minAvailable <= replicas, unique task names, lifecycle policies, known plugins, pod and job names, the queue exists,
  is Open and is a leaf (not root); updates change only minAvailable, tasks' replicas/minAvailable and
  priorityClassName, never the number of tasks.
- Queues: `volcano_queues`; PodGroups: `volcano_podgroups`.

Denials carry no code of their own, so kube-apiserver answers 400 with `admission webhook "<name>" denied the
request: <message>`.
"""

from __future__ import annotations

from ..errors import ApiError
from . import fields as f
from .volcano_queues import children_of, queue_named

_KNOWN_PLUGINS = ("env", "ssh", "svc", "tensorflow", "mpi", "pytorch", "ray", "hcclrank")
_EVENTS = ("*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "OutOfSync",
           "CommandIssued", "JobUpdated", "TaskFailed", "JobUnschedulable")
_POLICY_EVENTS = {"*", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "TaskFailed", "PodPending",
                  "PodRunning", "JobUnschedulable"}
_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
            "CompleteJob", "ResumeJob")


def _job_denied(message: str) -> ApiError:
    return f.denied("validatejob.volcano.sh", message.strip())


# Jobs ----------------------------------------------------------------------------------------------------------

def mutate_job(op: str, obj: dict) -> None:
    if op != "CREATE":
        return
    spec = obj.setdefault("spec", {})
    if not spec.get("queue"):
        spec["queue"] = "default"
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "volcano"
    if not spec.get("maxRetry"):
        spec["maxRetry"] = 3
    for i, task in enumerate(spec.get("tasks") or ()):
        if not task.get("name"):
            task["name"] = f"default{i}"
        pod = (task.get("template") or {}).get("spec") or {}
        if pod.get("hostNetwork") and not pod.get("dnsPolicy"):
            pod["dnsPolicy"] = "ClusterFirstWithHostNet"
        if task.get("minAvailable") is None:
            partition = task.get("partitionPolicy") or {}
            if partition.get("minPartitions"):
                task["minAvailable"] = partition["minPartitions"] * partition.get("partitionSize", 0)
            else:
                task["minAvailable"] = task.get("replicas", 0)
        if not task.get("maxRetry"):
            task["maxRetry"] = 3
    if not spec.get("minAvailable"):
        spec["minAvailable"] = sum(t.get("minAvailable", t.get("replicas", 0)) for t in spec.get("tasks") or ())
    plugins = spec.get("plugins")
    if plugins is not None:
        if any(name in plugins for name in ("tensorflow", "mpi", "pytorch", "ray")):
            plugins.setdefault("svc", [])
        if "mpi" in plugins:
            plugins.setdefault("ssh", [])


def _policies_message(policies, path: str) -> str:
    events_seen, codes_seen = set(), set()
    for policy in policies or ():
        events = ([policy["event"]] if policy.get("event") else []) + list(policy.get("events") or ())
        if events and policy.get("exitCode") is not None:
            return "must not specify event and exitCode simultaneously"
        if not events and policy.get("exitCode") is None:
            return "either event and exitCode should be specified"
        if events:
            for event in events:
                if event not in _POLICY_EVENTS:
                    return f"{path}: Invalid value: {f.render(event)}: invalid policy event"
                if policy.get("action") not in _ACTIONS:
                    return f"{path}: Invalid value: {f.render(policy.get('action'))}: invalid policy action"
                if event in events_seen:
                    return f"duplicate event {event}  across different policy"
                events_seen.add(event)
        else:
            code = policy["exitCode"]
            if code == 0:
                return "0 is not a valid error code"
            if code in codes_seen:
                return f"duplicate exitCode {code}"
            codes_seen.add(code)
    if "*" in events_seen and len(events_seen) > 1:
        return "if there's * here, no other policy should be here"
    return ""


def _policy_suffix(message: str) -> str:
    # multierror's rendering of one error, then the hint admit_job.go appends.
    return (f"1 error occurred:\n\t* {message}\n\n valid events are {_go_list(_EVENTS)}, valid actions are "
            f"{_go_list(_ACTIONS)};")


def _go_list(values) -> str:
    return "[" + " ".join(values) + "]"


def validate_job(op: str, obj: dict, old: dict | None, store) -> None:
    if op == "UPDATE":
        return _validate_job_update(obj, old)
    spec = obj.get("spec") or {}
    tasks = spec.get("tasks") or []
    name = obj["metadata"].get("name", "")
    if not tasks:
        raise _job_denied("No task specified in job spec")
    msg, names, total = "", set(), 0
    topology = spec.get("networkTopology") or {}  # admit_job.go validateNetworkTopology
    if topology.get("highestTierAllowed") is not None and topology.get("highestTierName"):
        msg += "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"
    for index, task in enumerate(tasks):
        replicas = task.get("replicas", 0)
        if task.get("minAvailable") is not None and task["minAvailable"] > replicas:
            msg += f" 'minAvailable' is greater than 'replicas' in task: {task.get('name')}, job: {name};"
        total += replicas
        if task.get("name") in names:
            msg += f" duplicated task name {task.get('name')};"
            break
        names.add(task.get("name"))
        problem = _policies_message(task.get("policies"), "spec.tasks.policies")
        if problem:
            msg += _policy_suffix(problem)
        pod_name = f"{name}-{task.get('name')}-{index}"
        errs = f.is_qualified_name(pod_name)
        if errs:
            msg += f"create pod with name {pod_name} validate failed {_go_list(errs)};"
    errs = f.is_qualified_name(name)
    if errs:
        msg += f"create job with name {name} validate failed {_go_list(errs)}"
    if total < spec.get("minAvailable", 0):
        msg += " job 'minAvailable' should not be greater than total replicas in tasks;"
    problem = _policies_message(spec.get("policies"), "spec.policies")
    if problem:
        msg += _policy_suffix(problem)
    for plugin in spec.get("plugins") or {}:
        if plugin not in _KNOWN_PLUGINS:
            msg += f" unable to find job plugin: {plugin};"
    queue_name = spec.get("queue", "")
    queue = queue_named(store, queue_name)
    if queue is None:
        msg += f' unable to find job queue: queue.scheduling.volcano.sh "{queue_name}" not found;'
    else:
        state = (queue.get("status") or {}).get("state", "")
        if state != "Open":
            msg += f" can only submit job to queue with state `Open`, queue `{queue_name}` status is `{state}`;"
        if queue_name == "root":
            msg += " can not submit job to root queue;"
        else:
            children = children_of(store, queue_name)
            if children:
                msg += (f" can only submit job to leaf queue, queue `{queue_name}` has {len(children)} child "
                        "queues;")
    if msg:
        raise _job_denied(msg)


def _validate_job_update(new: dict, old: dict) -> None:
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    total = 0
    for task in spec.get("tasks") or ():
        replicas, name = task.get("replicas", 0), task.get("name")
        if replicas < 0:
            raise _job_denied(f"'replicas' must be >= 0 in task: {name}")
        if task.get("minAvailable") is not None:
            if task["minAvailable"] < 0:
                raise _job_denied(f"'minAvailable' must be >= 0 in task: {name}")
            if task["minAvailable"] > replicas:
                raise _job_denied(f"'minAvailable' must be <= 'replicas' in task: {name}")
        total += replicas
    if spec.get("minAvailable", 0) > total:
        raise _job_denied("job 'minAvailable' must not be greater than total replicas")
    if spec.get("minAvailable", 0) < 0:
        raise _job_denied("job 'minAvailable' must be >= 0")
    if len(old_spec.get("tasks") or ()) != len(spec.get("tasks") or ()):
        raise _job_denied("job updates may not add or remove tasks")

    def comparable(s: dict) -> dict:
        s = {k: v for k, v in s.items() if k not in ("minAvailable", "priorityClassName")}
        s["tasks"] = [{k: v for k, v in t.items() if k not in ("replicas", "minAvailable")}
                      for t in s.get("tasks") or ()]
        return s

    if comparable(spec) != comparable(old_spec):
        raise _job_denied("job updates may not change fields other than `minAvailable`, `tasks[*].replicas under "
                          "spec` and `PriorityClassName`")


# Queues --------------------------------------------------------------------------------------------------------


JOB_KEY = ("batch.volcano.sh", "Job")
MUTATORS = {JOB_KEY: mutate_job}
VALIDATORS = {JOB_KEY: validate_job}
