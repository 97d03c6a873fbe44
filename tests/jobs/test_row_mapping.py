"""A Job row becomes objects that carry its flavor and limits: the MIG resource name, the flavor's node labels
and tolerations, and the runtime limit, for every kind on both schedulers. Each field is checked where the
scheduler and the kubelet read it, so dropping any one of them in the mapping fails here."""

import itertools

import pytest

from jobs.models import Job
from jobs.selectors import job_desired
from tests.factories import ClusterFactory, GpuFlavorFactory, PriorityTierFactory, TeamFactory, UserFactory

pytestmark = pytest.mark.django_db
MIG = "nvidia.com/mig-3g.40gb"
NODE_LABELS = {"nvidia.com/gpu.product": "A100-SXM4-80GB-MIG-3g.40gb", "pool": "mig"}
TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def pod_specs(obj: dict) -> list[dict]:
    spec = obj["spec"]
    if obj["kind"] == "RayJob":
        cluster = spec["rayClusterSpec"]
        return [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"]
                                                                  for g in cluster["workerGroupSpecs"]]
    if "tasks" in spec:
        return [task["template"]["spec"] for task in spec["tasks"]]
    return [spec["template"]["spec"]]


@pytest.mark.parametrize(("kind", "scheduler"), list(itertools.product(["pytorch", "ray", "batch"],
                                                                       ["kueue", "volcano"])))
def test_the_row_reaches_every_pod(kind, scheduler):
    cluster = ClusterFactory(scheduler=scheduler)
    flavor = GpuFlavorFactory(cluster=cluster, name="a100-mig", resource_name=MIG, sharing="mig",
                              gpus_per_node=14, node_labels=NODE_LABELS, tolerations=TOLERATIONS)
    job = Job.objects.create(team=TeamFactory(slug="nlp"), cluster=cluster, flavor=flavor, kind=kind,
                             priority_tier=PriorityTierFactory(name="standard"), name="train",
                             image="ghcr.io/acme/train:1", command=["python", "train.py"], workers=2,
                             gpus_per_worker=3, max_runtime_minutes=90, submitted_by=UserFactory())
    objects = job_desired(job=job)
    workloads = [o for o in objects if o["kind"] != "Service"]
    assert workloads
    gpu_limits = []
    for obj in workloads:
        for pod in pod_specs(obj):
            assert pod["nodeSelector"] == NODE_LABELS, obj["kind"]
            assert pod["tolerations"] == TOLERATIONS, obj["kind"]
            for container in pod["containers"]:
                limits = container["resources"]["limits"]
                assert "nvidia.com/gpu" not in limits
                gpu_limits.append(limits.get(MIG))
        # The runtime limit, where each kind enforces it: the Job, the RayJob, or every vcjob pod.
        deadlines = ([obj["spec"]["activeDeadlineSeconds"]] if "activeDeadlineSeconds" in obj["spec"]
                     else [pod["activeDeadlineSeconds"] for pod in pod_specs(obj)])
        assert set(deadlines) == {90 * 60}, obj["kind"]
    assert "3" in gpu_limits
    if kind == "ray":
        assert gpu_limits == [None, "3"]  # the head is CPU only
    else:
        assert set(gpu_limits) == {"3"}
