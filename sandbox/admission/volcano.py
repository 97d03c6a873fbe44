"""Volcano v1.15.1's admission webhooks for jobs and queues, and the queue state its controller opens.

- pkg/webhooks/admission/jobs/mutate/mutate_job.go (on create): queue "default", schedulerName "volcano",
  maxRetry 3 when 0, tasks named "default<i>", each task's minAvailable = replicas and maxRetry 3, the job's
  minAvailable = the tasks' sum, the svc plugin for tensorflow/mpi/pytorch/ray and ssh for mpi.
- pkg/webhooks/admission/jobs/validate/admit_job.go and util.go (validatejob.volcano.sh): at least one task,
  minAvailable <= replicas, unique task names, lifecycle policies, known plugins, pod and job names, the queue exists,
  is Open and is a leaf (not root); updates change only minAvailable, tasks' replicas/minAvailable and
  priorityClassName, never the number of tasks.
- PodGroups: `volcano_podgroups`.
- pkg/webhooks/admission/queues/mutate/mutate_queue.go: reclaimable true and weight 1 when unset.
- pkg/webhooks/admission/queues/validate/validate_queue.go (validatequeue.volcano.sh): quantities, guarantee <=
  deserved <= capability, state Open/Closed, parent exists and is not itself, children's guarantee and deserved sums
  within the parent's, a child's capability within its ancestors', deleting neither default nor root nor a queue
  with children.

Denials carry no code of their own, so kube-apiserver answers 400 with `admission webhook "<name>" denied the
request: <message>`.
"""

from __future__ import annotations

from decimal import Decimal

from ..errors import ApiError
from ..quantity import parse_quantity
from . import fields as f

GROUP = "scheduling.volcano.sh"
QUEUE_KEY = (GROUP, "Queue")
_KNOWN_PLUGINS = ("env", "ssh", "svc", "tensorflow", "mpi", "pytorch", "ray", "hcclrank")
_EVENTS = ("*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "OutOfSync",
           "CommandIssued", "JobUpdated", "TaskFailed", "JobUnschedulable")
_POLICY_EVENTS = {"*", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "TaskFailed", "PodPending",
                  "PodRunning", "JobUnschedulable"}
_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
            "CompleteJob", "ResumeJob")


def _job_denied(message: str) -> ApiError:
    return f.denied("validatejob.volcano.sh", message.strip())


def _queue_denied(message: str) -> ApiError:
    return f.denied("validatequeue.volcano.sh", message)


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


def queue_named(store, name: str):
    rt = store.registry.by_key.get(QUEUE_KEY)
    return None if rt is None else store._stored(rt, None, name)


def _children(store, name: str) -> list[dict]:
    rt = store.registry.by_key.get(QUEUE_KEY)
    if rt is None:
        return []
    return [q for q in store._objects.get(rt.key, {}).get("", {}).values()
            if (q.get("spec") or {}).get("parent") == name]


def validate_job(op: str, obj: dict, old: dict | None, store) -> None:
    if op == "UPDATE":
        return _validate_job_update(obj, old)
    spec = obj.get("spec") or {}
    tasks = spec.get("tasks") or []
    name = obj["metadata"].get("name", "")
    if not tasks:
        raise _job_denied("No task specified in job spec")
    msg, names, total = "", set(), 0
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
            children = _children(store, queue_name)
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

def mutate_queue(op: str, obj: dict) -> None:
    if op != "CREATE":
        return
    spec = obj.setdefault("spec", {})
    spec.setdefault("reclaimable", True)
    if not spec.get("weight"):
        spec["weight"] = 1


def _amount(resource: str, value) -> Decimal:
    """api.Resource's units: milli-CPU, bytes of memory, milli-units of scalar resources."""
    try:
        q = parse_quantity(value)
    except (ValueError, TypeError):
        return Decimal(0)
    return q if resource == "memory" else q * 1000


def _resources(values) -> dict[str, Decimal]:
    return {k: _amount(k, v) for k, v in (values or {}).items()}


def _resource_string(values: dict[str, Decimal]) -> str:
    """api.Resource.String(): cpu and memory always, then the scalar resources."""
    parts = [f"cpu {values.get('cpu', 0):.2f}", f"memory {values.get('memory', 0):.2f}"]
    parts += [f"{k} {v:.2f}" for k, v in sorted(values.items()) if k not in ("cpu", "memory")]
    return ", ".join(parts)


def _less_partly(parent: dict, total: dict) -> bool:
    return any(parent.get(k, Decimal(0)) < v for k, v in total.items())


def _quantity_causes(spec: dict) -> list[dict]:
    base, causes = "requestBody.spec", []
    for part in ("capability", "deserved"):
        for name, value in (spec.get(part) or {}).items():
            if _amount(name, value) < 0:
                causes.append(f.invalid(f"{base}.{part}.{name}", str(value), "must be greater than or equal to 0"))
    deserved = spec.get("deserved") or {}
    for name, value in ((spec.get("guarantee") or {}).get("resource") or {}).items():
        if name not in deserved:
            causes.append(f.invalid(f"{base}.deserved.{name}", "<nil>",
                                    f"deserved[{name}] must be >= guarantee[{name}]={value}"))
        elif _amount(name, deserved[name]) < _amount(name, value):
            causes.append(f.invalid(f"{base}.deserved.{name}", str(deserved[name]),
                                    f"deserved[{name}]={deserved[name]} must be >= guarantee[{name}]={value}"))
    capability = spec.get("capability") or {}
    for name, value in deserved.items():
        if name in capability and _amount(name, value) > _amount(name, capability[name]):
            causes.append(f.invalid(f"{base}.deserved.{name}", str(value),
                                    f"deserved[{name}]={value} must be <= capability[{name}]={capability[name]}"))
    return causes


def validate_queue(op: str, obj: dict, old: dict | None, store) -> None:
    name = obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    causes = _quantity_causes(spec)
    state = (obj.get("status") or {}).get("state")
    if state and state not in ("Open", "Closed"):
        causes.append(f.invalid("requestBody.spec.state", state, "queue state must be in [Open Closed]"))
    if causes:
        raise _queue_denied(f.aggregate(causes))
    parent_name = spec.get("parent", "")
    old_spec = (old or {}).get("spec") or {}
    if (op == "CREATE" or old_spec.get("parent", "") != parent_name) and parent_name not in ("", "root"):
        if parent_name == name:
            raise _queue_denied(f"queue {name} cannot use itself as parent")
        if queue_named(store, parent_name) is None:
            raise _queue_denied(f"failed to get parent queue of queue {name}: queue.scheduling.volcano.sh "
                                f'"{parent_name}" not found')
    changed = op == "CREATE" or any(old_spec.get(k) != spec.get(k) for k in ("parent", "capability", "deserved")) \
        or (old_spec.get("guarantee") or {}).get("resource") != (spec.get("guarantee") or {}).get("resource")
    if name != "root" and changed:
        _hierarchy(store, obj)


def _hierarchy(store, queue: dict) -> None:
    name, spec = queue["metadata"]["name"], queue.get("spec") or {}
    parent_name = spec.get("parent", "")
    if parent_name not in ("", "root"):
        parent = queue_named(store, parent_name)
        if parent is None:
            raise _queue_denied(f'parent queue {parent_name} not found: queue.scheduling.volcano.sh "{parent_name}" '
                                "not found")
        for resource, value in _resources(spec.get("capability")).items():
            ancestor = _ancestor_capability(store, queue, resource)
            if ancestor is not None and value > ancestor:
                raise _queue_denied(f"queue {name} capability[{resource}]={_fmt(resource, value)} exceeds its "
                                    f"ancestor's capability={_fmt(resource, ancestor)}")
        siblings = [q for q in _children(store, parent_name) if q["metadata"]["name"] != name] + [queue]
        _sums(parent, siblings, f"parent queue {parent_name}")
    children = _children(store, name)
    if children:
        for resource, value in _resources(spec.get("capability")).items():
            deepest = max((_subtree_capability(store, c, resource) for c in children), default=Decimal(0))
            if value < deepest:
                raise _queue_denied(f"queue {name} capability[{resource}]={_fmt(resource, value)} is smaller than "
                                    f"its descendants' max capability={_fmt(resource, deepest)}")
        _sums(queue, children, f"queue {name}")


def _sums(parent: dict, children: list[dict], who: str) -> None:
    pspec = parent.get("spec") or {}
    limits = {"guarantee": _resources((pspec.get("guarantee") or {}).get("resource")),
              "deserved": _resources(pspec.get("deserved"))}
    totals: dict[str, dict[str, Decimal]] = {"guarantee": {}, "deserved": {}}
    for child in children:
        cspec = child.get("spec") or {}
        for part, values in (("guarantee", (cspec.get("guarantee") or {}).get("resource")),
                             ("deserved", cspec.get("deserved"))):
            for k, v in _resources(values).items():
                totals[part][k] = totals[part].get(k, Decimal(0)) + v
            if _less_partly(limits[part], totals[part]):
                raise _queue_denied(f"{who} validation failed: sum of children's {part} "
                                    f"({_resource_string(totals[part])}) exceeds parent's {part} limit "
                                    f"({_resource_string(limits[part])})")


def _fmt(resource: str, value: Decimal) -> str:
    if resource == "cpu":
        return f"{value.normalize():f}m" if value % 1000 else f"{(value / 1000).normalize():f}"
    if resource == "memory":
        return f"{value.normalize():f}"
    return f"{value:.2f}"


def _ancestor_capability(store, queue: dict, resource: str):
    parent = (queue.get("spec") or {}).get("parent", "")
    while parent not in ("", "root"):
        node = queue_named(store, parent)
        if node is None:
            return None
        value = _resources((node.get("spec") or {}).get("capability")).get(resource, Decimal(0))
        if value > 0:
            return value
        parent = (node.get("spec") or {}).get("parent", "")
    return None


def _subtree_capability(store, queue: dict, resource: str) -> Decimal:
    value = _resources((queue.get("spec") or {}).get("capability")).get(resource, Decimal(0))
    if value > 0:
        return value
    children = _children(store, queue["metadata"]["name"])
    return max((_subtree_capability(store, c, resource) for c in children), default=Decimal(0))


def validate_queue_delete(op: str, obj: dict | None, old: dict, store) -> None:
    name = old["metadata"]["name"]
    if name in ("default", "root"):
        raise _queue_denied(f"`{name}` queue can not be deleted")
    children = sorted(c["metadata"]["name"] for c in _children(store, name))
    if children:
        raise _queue_denied(f"queue {name} can not be deleted because it has {len(children)} child queues: "
                            + ", ".join(children))


def open_queue(event: str, obj: dict, store, rt) -> None:
    """The queue controller (pkg/controllers/queue) reports a new queue `Open` unless it is being closed."""
    if event == "ADDED" and not (obj.get("status") or {}).get("state"):
        store.update(rt, {**obj, "status": {**(obj.get("status") or {}), "state": "Open"}}, None,
                     obj["metadata"]["name"], subresource="status")


MUTATORS = {("batch.volcano.sh", "Job"): mutate_job, QUEUE_KEY: mutate_queue}
VALIDATORS = {("batch.volcano.sh", "Job"): validate_job, QUEUE_KEY: validate_queue}
DELETE_VALIDATORS = {QUEUE_KEY: validate_queue_delete}
CONTROLLERS = {QUEUE_KEY: open_queue}


def install_queues(store) -> None:
    """Volcano's controllers create the `root` queue and the `default` queue jobs without a queue go to."""
    rt = store.registry.by_key.get(QUEUE_KEY)
    if rt is None:
        return
    for name, spec in (("root", {"reclaimable": False, "weight": 1}), ("default", {"reclaimable": True,
                                                                                    "weight": 1})):
        if store._stored(rt, None, name) is None:
            store.create(rt, {"apiVersion": rt.api_version(), "kind": "Queue", "metadata": {"name": name},
                              "spec": spec})
