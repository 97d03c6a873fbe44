"""Pure builders for the objects a portal job becomes: what is the same on every scheduler (metadata, pods, a
KubeRay RayJob, a DRA job's ResourceClaimTemplate); each backend assembles its own shapes from them
(`Backend.job_objects`: an Indexed Job under Kueue, a vcjob under Volcano) and names its scheduling labels.
Every object and pod carries the team and job labels. Commands stay argv lists: nothing goes through a shell.
"""

import shlex
from dataclasses import dataclass, field

import yaml

from backends import backend_for
from portal.naming import dns1035_name, team_labels
from portal.upstream import RAY_API

from .claims import claim_template_manifest, container_claims, pod_claims

JOB_LABEL = "gpu-portal.io/job"
# Every object of a job shares one name, so it must suit the strictest kind: a DNS-1035 label (the headless
# Service; a RayJob) of at most 47 characters (KubeRay ray-operator/controllers/ray/utils/constant.go:
# MaxRayJobNameLength = MaxRayClusterNameLength - 6). That also leaves room for what the controllers derive
# from it: Indexed Job pod hostnames `<name>-<index>` and Volcano pods `<name>-<task>-<index>` (≤ 63).
OBJECT_NAME_LIMIT = 47


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
    pod_annotations: dict = field(default_factory=dict)  # on every pod set (Kueue's topology request)
    preferred_node_labels: dict = field(default_factory=dict)  # scored, not required (Volcano: prefer reserved)
    network_topology: dict = field(default_factory=dict)  # a vcjob's networkTopology
    device_class: str = ""  # a DRA flavor: GPUs come from ResourceClaims of this DeviceClass
    device_selector: str = ""
    # A workspace's run (`jobs.selectors.SPEC_EXTRAS`): its home volume, where it is mounted, the port it serves.
    volumes: tuple[dict, ...] = ()
    volume_mounts: tuple[dict, ...] = ()
    ports: tuple[dict, ...] = ()


def labels(spec: JobSpec) -> dict[str, str]:
    return {**team_labels(spec.team_slug), JOB_LABEL: str(spec.job_id)}


def _metadata(spec: JobSpec, name: str | None = None, scheduling: bool = True) -> dict:
    meta = {"name": name or spec.name, "namespace": spec.namespace,
            "labels": {**labels(spec), **(backend_for(spec.scheduler).scheduling_labels(spec) if scheduling else {})}}
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
        # The request is written, not left to default from the limit: the namespace's LimitRange gives GPUs a
        # default request of 0, and Kueue applies a LimitRange's defaults before it copies missing requests from
        # limits (kueue pkg/workload/resources.go AdjustResources), so a limit alone counts as 0 GPUs against the
        # team's quota while the API server gives the pod the limit.
        requests[spec.gpu_resource] = limits[spec.gpu_resource] = str(gpus)
    return {"requests": requests, "limits": limits}


JOB_ID_ENV = "GPU_PORTAL_JOB_ID"  # the job's own id, for its code to report progress under (Portal.report_progress)


def _env(spec: JobSpec, extra: list[dict] | None = None) -> list[dict]:
    own = {"name": JOB_ID_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_LABEL}']"}}}
    return [own, *(extra or []), *({"name": k, "value": v} for k, v in spec.env)]


def _container(spec: JobSpec, *, name: str, env: list[dict] | None = None, gpus: int | None = None) -> dict:
    container = {"name": name, "image": spec.image, "resources": _resources(spec, gpus), "env": _env(spec, env)}
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if spec.ports:
        container["ports"] = [dict(port) for port in spec.ports]
    if spec.volume_mounts:
        container["volumeMounts"] = [dict(mount) for mount in spec.volume_mounts]
    return container


def _pod_spec(spec: JobSpec, containers: list[dict], **extra) -> dict:
    pod = {"restartPolicy": "Never", "containers": containers, **extra}
    if any("claims" in c["resources"] for c in containers):
        pod["resourceClaims"] = pod_claims(spec.name)
    if spec.volumes:
        pod["volumes"] = [dict(volume) for volume in spec.volumes]
    if spec.priority_class:
        pod["priorityClassName"] = spec.priority_class
    if spec.node_labels:
        pod["nodeSelector"] = dict(sorted(spec.node_labels.items()))
    if spec.tolerations:
        pod["tolerations"] = list(spec.tolerations)
    if spec.preferred_node_labels:
        expressions = [{"key": k, "operator": "In", "values": [v]}
                       for k, v in sorted(spec.preferred_node_labels.items())]
        pod["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": expressions}}]}}
    return pod


def _template(spec: JobSpec, pod: dict) -> dict:
    metadata = {"labels": labels(spec)}
    if spec.pod_annotations:
        metadata["annotations"] = dict(spec.pod_annotations)
    return {"metadata": metadata, "spec": pod}


class _Parts:
    """The scheduler-neutral builders a backend assembles its job objects from (`backends.base.JobParts`)."""

    job_label = JOB_LABEL

    @staticmethod
    def metadata(spec: JobSpec, *, scheduling: bool = True) -> dict:
        return _metadata(spec, scheduling=scheduling)

    @staticmethod
    def template(spec: JobSpec, *, container: str, env: list[dict] | None = None, **pod) -> dict:
        return _template(spec, _pod_spec(spec, [_container(spec, name=container, env=env)], **pod))


PARTS = _Parts()


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
    metadata["labels"].update(backend_for(spec.scheduler).ray_labels(spec))
    return {"apiVersion": RAY_API, "kind": "RayJob", "metadata": metadata, "spec": job_spec}


def job_manifests(spec: JobSpec) -> list[dict]:
    """The job's objects; a DRA job's ResourceClaimTemplate first, so its pods find it when they are created."""
    claims = [claim_template_manifest(name=spec.name, namespace=spec.namespace, labels=labels(spec),
                                      device_class=spec.device_class, count=spec.gpus_per_worker,
                                      selector=spec.device_selector)] \
        if spec.device_class and spec.gpus_per_worker else []
    if spec.kind == "ray":
        return [*claims, ray_job_manifest(spec)]
    return claims + backend_for(spec.scheduler).job_objects(spec, PARTS)
