import itertools

import pytest
import yaml

from jobs.manifests import JobSpec, job_manifests

LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "nlp", "gpu-portal.io/job": "42"}


def spec(**overrides) -> JobSpec:
    fields = dict(name="train-42", namespace="nlp", team_slug="nlp", job_id=42, kind="pytorch", scheduler="kueue",
                  image="ghcr.io/acme/train:1.2", command=("torchrun",), args=("train.py", "--epochs", "3"),
                  env=(("HF_HOME", "/cache"),), workers=2, gpus_per_worker=4, cpu_per_worker=16,
                  memory_gib_per_worker=128, priority_class="gpu-portal-standard", volcano_queue="nlp",
                  max_runtime_seconds=3600, node_labels={"nvidia.com/gpu.product": "H100"})
    fields.update(overrides)
    return JobSpec(**fields)


RESOURCES = {"requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"},
             "limits": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"}}


def test_pytorch_on_kueue_is_an_indexed_job_with_a_headless_service():
    service, job = job_manifests(spec())
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "train-42", "namespace": "nlp", "labels": LABELS},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"gpu-portal.io/job": "42"},
                 "ports": [{"name": "rendezvous", "port": 29500, "targetPort": 29500}]},
    }
    assert job["metadata"]["labels"] == {**LABELS, "kueue.x-k8s.io/queue-name": "default",
                                         "kueue.x-k8s.io/priority-class": "gpu-portal-standard"}
    assert {k: job["spec"][k] for k in ("parallelism", "completions", "completionMode", "backoffLimit",
                                        "activeDeadlineSeconds")} == {
        "parallelism": 2, "completions": 2, "completionMode": "Indexed", "backoffLimit": 0,
        "activeDeadlineSeconds": 3600}
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == "train-42" and pod["priorityClassName"] == "gpu-portal-standard"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "H100"}
    container = pod["containers"][0]
    assert container["command"] == ["torchrun"] and container["args"] == ["train.py", "--epochs", "3"]
    assert container["resources"] == RESOURCES
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["MASTER_ADDR"] == "train-42-0.train-42" and env["WORLD_SIZE"] == "2"
    assert env["PET_NPROC_PER_NODE"] == "4" and env["HF_HOME"] == "/cache"
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert env["RANK"] == {"fieldRef": {"fieldPath": index}}
    assert env["GPU_PORTAL_JOB_ID"] == {"fieldRef": {"fieldPath": "metadata.labels['gpu-portal.io/job']"}}
    assert job["spec"]["template"]["metadata"]["labels"] == LABELS


def test_pytorch_on_volcano_is_a_gang_vcjob_with_the_pytorch_plugin():
    (job,) = job_manifests(spec(scheduler="volcano", workers=3))
    assert job["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert job["metadata"]["labels"] == {**LABELS, "volcano.sh/queue-name": "nlp"}
    assert job["spec"]["queue"] == "nlp" and job["spec"]["minAvailable"] == 3
    assert [(t["name"], t["replicas"]) for t in job["spec"]["tasks"]] == [("master", 1), ("worker", 2)]
    assert job["spec"]["plugins"] == {"pytorch": ["--master=master", "--worker=worker", "--port=23456"],
                                      "svc": ["--disable-network-policy"]}
    assert job["spec"]["tasks"][0]["template"]["spec"]["activeDeadlineSeconds"] == 3600


def test_ray_job_under_kueue_and_volcano():
    (kueue,) = job_manifests(spec(kind="ray", command=("python", "tune.py"), args=("--trials", "8 x")))
    assert kueue["kind"] == "RayJob" and kueue["spec"]["shutdownAfterJobFinishes"] is True
    assert kueue["spec"]["entrypoint"] == "python tune.py --trials '8 x'"
    assert yaml.safe_load(kueue["spec"]["runtimeEnvYAML"]) == {"env_vars": {"HF_HOME": "/cache"}}
    workers = kueue["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (2, 2, 2)
    head = kueue["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["limits"]
    assert kueue["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    (volcano,) = job_manifests(spec(kind="ray", scheduler="volcano"))
    assert volcano["metadata"]["labels"]["volcano.sh/queue-name"] == "nlp"
    assert volcano["metadata"]["labels"]["ray.io/priority-class-name"] == "gpu-portal-standard"
    assert "ray.io/scheduler-name" not in volcano["metadata"]["labels"]


def test_batch_jobs():
    (kueue,) = job_manifests(spec(kind="batch", workers=1, gpus_per_worker=0))
    assert kueue["kind"] == "Job" and kueue["spec"]["completions"] == 1
    assert "nvidia.com/gpu" not in kueue["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    (volcano,) = job_manifests(spec(kind="batch", scheduler="volcano", workers=4))
    assert [(t["name"], t["replicas"]) for t in volcano["spec"]["tasks"]] == [("main", 4)]


@pytest.mark.parametrize(("kind", "scheduler"), list(itertools.product(["pytorch", "ray", "batch"],
                                                                       ["kueue", "volcano"])))
def test_every_kind_and_backend_is_valid_against_upstream_crds_and_kubernetes_schemas(kind, scheduler, crds_dir):
    from sandbox.validation import Validator

    validator = Validator(crd_dirs=[crds_dir])
    for obj in job_manifests(spec(kind=kind, scheduler=scheduler)):
        assert validator.validate(obj, strict=True) == [], (kind, scheduler, obj["kind"])


def volcano_webhook_defaults(job: dict) -> dict:
    """What Volcano v1.15.1's mutating webhook does to retries (pkg/webhooks/admission/jobs/mutate/
    mutate_job.go): a job or task maxRetry of 0 (or none) becomes 3."""
    job = yaml.safe_load(yaml.safe_dump(job))
    if not job["spec"].get("maxRetry"):
        job["spec"]["maxRetry"] = 3
    for task in job["spec"]["tasks"]:
        if not task.get("maxRetry"):
            task["maxRetry"] = 3
    return job


RESTARTS = {"RestartJob", "RestartTask", "RestartPod", "RestartPartition"}


@pytest.mark.parametrize("kind", ["pytorch", "batch"])
def test_no_retry_on_failure_survives_volcanos_defaulting(kind):
    (job,) = job_manifests(spec(kind=kind, scheduler="volcano", workers=3))
    admitted = volcano_webhook_defaults(job)
    assert admitted["spec"]["maxRetry"] == job["spec"]["maxRetry"] == 3  # what we send is what runs
    policies = admitted["spec"]["policies"]
    # A failed pod ends the job; no policy (job or task) restarts anything on failure.
    assert {"event": "PodFailed", "action": "TerminateJob"} in policies
    for policy in policies + [p for t in admitted["spec"]["tasks"] for p in t.get("policies", [])]:
        events = set(policy.get("events", [])) | {policy.get("event")}
        if policy["action"] in RESTARTS:
            assert events == {"PodEvicted"}, policy  # only a preemption's eviction queues the job again
