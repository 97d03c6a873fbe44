"""Pure builders for the objects a portal job becomes, per kind and scheduler backend.

PyTorch on Kueue is an Indexed batch/v1 Job plus the headless Service its pods rendezvous through (Kueue's
Kubeflow v1 PyTorchJob integration is off by default since v0.19); on Volcano it is a vcjob with the pytorch
plugin. Ray is a KubeRay RayJob on both. Batch is a batch/v1 Job (Kueue) or a single-task vcjob (Volcano).
Every object and pod carries the team and job labels. Commands stay argv lists: nothing goes through a shell.
"""

import shlex
from dataclasses import dataclass, field

import yaml

from portal.naming import dns1035_name, team_labels
from tenants.choices import Scheduler

from .claims import claim_template_manifest, container_claims, pod_claims

JOB_LABEL = "gpu-portal.io/job"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
VOLCANO_QUEUE_LABEL = "volcano.sh/queue-name"
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
RENDEZVOUS_PORT = 29500
VOLCANO_PYTORCH_PORT = 23456
# Every object of a job shares one name, so it must suit the strictest kind: a DNS-1035 label (the headless
# Service; a RayJob) of at most 47 characters (KubeRay v1.7.0 ray-operator/controllers/ray/utils/constant.go:
# MaxRayJobNameLength = MaxRayClusterNameLength - 6). That also leaves room for what the controllers derive
# from it: Indexed Job pod hostnames `<name>-<index>` and Volcano pods `<name>-<task>-<index>` (≤ 63).
OBJECT_NAME_LIMIT = 47
# "No retries": no policy restarts a job on failure (a failed pod terminates it). Only an eviction by the
# scheduler's preempt/reclaim restarts it, which is how a preempted vcjob queues again; maxRetry bounds those.
# It is written out because Volcano's mutating webhook turns 0 into 3 (v1.15.1
# pkg/webhooks/admission/jobs/mutate/mutate_job.go, patchDefaultMaxRetry), so 0 can never mean "none".
VOLCANO_MAX_EVICTION_RESTARTS = 3
VOLCANO_POLICIES = (
    {"event": "PodFailed", "action": "TerminateJob"},
    {"event": "PodEvicted", "action": "RestartJob"},
)


def job_object_name(name: str, job_id: int) -> str:
    """The cluster name of a job's objects: the user's name and the row id (so a resubmit never collides),
    valid for every kind whatever the name (`1st-run` becomes `x-1st-run-908`)."""
    return dns1035_name(name, str(job_id), limit=OBJECT_NAME_LIMIT)


@dataclass(frozen=True)
class JobSpec:
    name: str  # Kubernetes name, unique in the namespace
    namespace: str
    team_slug: str
    job_id: int
    kind: str
    scheduler: str  # a tenants.choices.Scheduler value
    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    workers: int = 1
    gpus_per_worker: int = 1
    gpu_resource: str = "nvidia.com/gpu"
    cpu_per_worker: int = 8
    memory_gib_per_worker: int = 64
    priority_class: str = ""
    local_queue: str = "default"
    volcano_queue: str = ""
    max_runtime_seconds: int = 86400
    node_labels: dict = field(default_factory=dict)
    tolerations: list = field(default_factory=list)
    annotations: dict = field(default_factory=dict)
    device_class: str = ""  # a DRA flavor: GPUs come from ResourceClaims of this DeviceClass
    device_selector: str = ""


def labels(spec: JobSpec) -> dict[str, str]:
    return {**team_labels(spec.team_slug), JOB_LABEL: str(spec.job_id)}


def _scheduling_labels(spec: JobSpec) -> dict[str, str]:
    if spec.scheduler == Scheduler.KUEUE:
        extra = {QUEUE_LABEL: spec.local_queue}
        if spec.priority_class:
            extra[KUEUE_PRIORITY_LABEL] = spec.priority_class
        return extra
    return {VOLCANO_QUEUE_LABEL: spec.volcano_queue}


def _metadata(spec: JobSpec, name: str | None = None, scheduling: bool = True) -> dict:
    meta = {"name": name or spec.name, "namespace": spec.namespace,
            "labels": {**labels(spec), **(_scheduling_labels(spec) if scheduling else {})}}
    if spec.annotations:
        meta["annotations"] = dict(spec.annotations)
    return meta


def _resources(spec: JobSpec, gpus: int | None = None) -> dict:
    gpus = spec.gpus_per_worker if gpus is None else gpus
    requests = {"cpu": str(spec.cpu_per_worker), "memory": f"{spec.memory_gib_per_worker}Gi"}
    limits = dict(requests)
    if gpus and spec.device_class:
        return {"requests": requests, "limits": limits, "claims": container_claims()}
    if gpus:
        limits[spec.gpu_resource] = str(gpus)  # extended resources: the request defaults to the limit
    return {"requests": requests, "limits": limits}


def _env(spec: JobSpec, extra: list[dict] | None = None) -> list[dict]:
    return (extra or []) + [{"name": k, "value": v} for k, v in spec.env]


def _container(spec: JobSpec, *, name: str, env: list[dict] | None = None, gpus: int | None = None) -> dict:
    container = {"name": name, "image": spec.image, "resources": _resources(spec, gpus), "env": _env(spec, env)}
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    return container


def _pod_spec(spec: JobSpec, containers: list[dict], **extra) -> dict:
    pod = {"restartPolicy": "Never", "containers": containers, **extra}
    if any("claims" in c["resources"] for c in containers):
        pod["resourceClaims"] = pod_claims(spec.name)
    if spec.priority_class:
        pod["priorityClassName"] = spec.priority_class
    if spec.node_labels:
        pod["nodeSelector"] = dict(sorted(spec.node_labels.items()))
    if spec.tolerations:
        pod["tolerations"] = list(spec.tolerations)
    return pod


def _template(spec: JobSpec, pod: dict) -> dict:
    return {"metadata": {"labels": labels(spec)}, "spec": pod}


# --- PyTorch -------------------------------------------------------------------------------------------------


def _rendezvous_env(spec: JobSpec) -> list[dict]:
    """torchrun's c10d rendezvous: worker 0's stable DNS name through the headless Service."""
    index = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    return [
        {"name": "MASTER_ADDR", "value": f"{spec.name}-0.{spec.name}"},
        {"name": "MASTER_PORT", "value": str(RENDEZVOUS_PORT)},
        {"name": "WORLD_SIZE", "value": str(spec.workers)},
        {"name": "RANK", "valueFrom": index},
        {"name": "PET_NNODES", "value": str(spec.workers)},
        {"name": "PET_NPROC_PER_NODE", "value": str(max(1, spec.gpus_per_worker))},
        {"name": "PET_NODE_RANK", "valueFrom": index},
        {"name": "PET_RDZV_BACKEND", "value": "c10d"},
        {"name": "PET_RDZV_ENDPOINT", "value": f"{spec.name}-0.{spec.name}:{RENDEZVOUS_PORT}"},
    ]


def headless_service_manifest(spec: JobSpec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, scheduling=False),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: str(spec.job_id)},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT}],
        },
    }


def indexed_job_manifest(spec: JobSpec, *, env: list[dict] | None = None, subdomain: str | None = None) -> dict:
    """All workers in one Job: Kueue admits it as one workload, so the gang is all or nothing."""
    extra = {"subdomain": subdomain} if subdomain else {}
    pod = _pod_spec(spec, [_container(spec, name="worker", env=env)], **extra)
    job_spec = {
        "parallelism": spec.workers,
        "completions": spec.workers,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "activeDeadlineSeconds": spec.max_runtime_seconds,
        "template": _template(spec, pod),
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _metadata(spec), "spec": job_spec}


def volcano_job_manifest(spec: JobSpec, tasks: list[dict], plugins: dict | None = None) -> dict:
    job_spec = {
        "schedulerName": "volcano",
        "queue": spec.volcano_queue,
        "minAvailable": sum(t["replicas"] for t in tasks),
        "maxRetry": VOLCANO_MAX_EVICTION_RESTARTS,
        "policies": [dict(policy) for policy in VOLCANO_POLICIES],
        "tasks": tasks,
    }
    if plugins:
        job_spec["plugins"] = plugins
    if spec.priority_class:
        job_spec["priorityClassName"] = spec.priority_class
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": _metadata(spec), "spec": job_spec}


def _volcano_task(spec: JobSpec, name: str, replicas: int) -> dict:
    pod = _pod_spec(spec, [_container(spec, name=name)], activeDeadlineSeconds=spec.max_runtime_seconds)
    return {"name": name, "replicas": replicas, "template": _template(spec, pod)}


def pytorch_manifests(spec: JobSpec) -> list[dict]:
    if spec.scheduler == Scheduler.KUEUE:
        return [headless_service_manifest(spec),
                indexed_job_manifest(spec, env=_rendezvous_env(spec), subdomain=spec.name)]
    tasks = [_volcano_task(spec, "master", 1)]
    if spec.workers > 1:
        tasks.append(_volcano_task(spec, "worker", spec.workers - 1))
    # The pytorch plugin injects MASTER_ADDR/PORT, WORLD_SIZE and RANK. Its svc plugin would add a
    # NetworkPolicy per job; the team namespace already allows pod-to-pod traffic inside it, so that is off.
    plugins = {"pytorch": ["--master=master", "--worker=worker", f"--port={VOLCANO_PYTORCH_PORT}"],
               "svc": ["--disable-network-policy"]}
    return [volcano_job_manifest(spec, tasks, plugins)]


# --- Ray -----------------------------------------------------------------------------------------------------


def ray_job_manifest(spec: JobSpec) -> dict:
    """A RayJob with a CPU head and one GPU worker group; the cluster goes away when the job ends."""
    head = _pod_spec(spec, [{**_container(spec, name="ray-head", gpus=0), "ports": [
        {"containerPort": 6379, "name": "gcs"}, {"containerPort": 8265, "name": "dashboard"}]}])
    worker = _pod_spec(spec, [_container(spec, name="ray-worker")])
    for pod in (head, worker):
        pod.pop("restartPolicy")  # KubeRay manages restarts of Ray pods
        for container in pod["containers"]:
            container.pop("command", None)
            container.pop("args", None)
    runtime_env = {"env_vars": dict(spec.env)} if spec.env else {}
    job_spec = {
        "entrypoint": shlex.join([*spec.command, *spec.args]),
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": 600,
        "activeDeadlineSeconds": spec.max_runtime_seconds,
        "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": _template(spec, head)},
            "workerGroupSpecs": [{
                "groupName": "gpu-workers",
                "replicas": spec.workers,
                "minReplicas": spec.workers,
                "maxReplicas": spec.workers,
                "rayStartParams": {},
                "template": _template(spec, worker),
            }],
        },
    }
    if runtime_env:
        job_spec["runtimeEnvYAML"] = yaml.safe_dump(runtime_env, sort_keys=True)
    metadata = _metadata(spec)
    if spec.scheduler == Scheduler.VOLCANO and spec.priority_class:
        metadata["labels"][RAY_PRIORITY_LABEL] = spec.priority_class
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata, "spec": job_spec}


# --- batch ---------------------------------------------------------------------------------------------------


def batch_manifests(spec: JobSpec) -> list[dict]:
    if spec.scheduler == Scheduler.KUEUE:
        return [indexed_job_manifest(spec)]
    return [volcano_job_manifest(spec, [_volcano_task(spec, "main", spec.workers)])]


def job_manifests(spec: JobSpec) -> list[dict]:
    """The job's objects; a DRA job's ResourceClaimTemplate first, so its pods find it when they are created."""
    claims = [claim_template_manifest(name=spec.name, namespace=spec.namespace, labels=labels(spec),
                                      device_class=spec.device_class, count=spec.gpus_per_worker,
                                      selector=spec.device_selector)] \
        if spec.device_class and spec.gpus_per_worker else []
    if spec.kind == "pytorch":
        return claims + pytorch_manifests(spec)
    if spec.kind == "ray":
        return [*claims, ray_job_manifest(spec)]
    return claims + batch_manifests(spec)
