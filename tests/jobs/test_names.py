"""Whatever a job is called, every object it becomes is one a real API server and its controllers accept.

Properties over job names (digits first, every length the form allows, ids up to 64 bits), for every kind on
both schedulers: each object passes kubernetes-validate strictly (core kinds) or the upstream CRD (custom
kinds), and the name rules the upstream code applies beyond the schemas.
"""

import itertools

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.manifests import OBJECT_NAME_LIMIT, job_manifests, job_object_name
from jobs.models import MAX_WORKERS
from portal.naming import is_dns1035_label, is_dns1123_label
from tests.jobs.test_manifests import spec
from tests.portal.test_deployment import KUBERNETES_VERSION

# What the job name field accepts: a DNS-1123 label of at most 40 characters.
NAMES = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True)
IDS = st.integers(min_value=1, max_value=2**63 - 1)
KINDS = list(itertools.product(["pytorch", "ray", "batch"], ["kueue", "volcano"]))


def name_problems(obj: dict, workers: int) -> list[str]:
    """Rules the schemas do not carry, each from the upstream source that applies it."""
    name, kind = obj["metadata"]["name"], obj["kind"]
    problems = []
    if not is_dns1123_label(name):  # every job object's name is also a label value (job-name) and a hostname
        problems.append(f"{kind} {name!r} is not a DNS-1123 label")
    if kind == "Service" and not is_dns1035_label(name):
        # kubernetes pkg/apis/core/validation/validation.go: ValidateServiceName = NameIsDNS1035Label
        problems.append(f"Service {name!r} is not a DNS-1035 label")
    if kind == "RayJob" and not (is_dns1035_label(name) and len(name) <= 47):
        # kuberay v1.7.0 ray-operator/controllers/ray/utils/validation.go ValidateRayJobMetadata
        problems.append(f"RayJob {name!r} is not a DNS-1035 label of at most 47 characters")
    if obj["apiVersion"] == "batch/v1":
        pod = obj["spec"]["template"]["spec"]
        # Indexed Job pods are named and hostnamed `<job>-<index>` (kubernetes pkg/controller/job/indexed_job_utils.go)
        hostname = f"{name}-{workers - 1}"
        if not is_dns1123_label(hostname):
            problems.append(f"pod hostname {hostname!r} is not a DNS-1123 label")
        if "subdomain" in pod and not is_dns1123_label(pod["subdomain"]):
            problems.append(f"subdomain {pod['subdomain']!r} is not a DNS-1123 label")
    if obj["apiVersion"] == "batch.volcano.sh/v1alpha1":
        for task in obj["spec"]["tasks"]:
            # volcano v1.15.1 admit_job.go: task names are DNS-1123 labels; helpers.go: pods are `%s-%s-%d`
            if not is_dns1123_label(task["name"]):
                problems.append(f"task {task['name']!r} is not a DNS-1123 label")
            pod_name = f"{name}-{task['name']}-{task['replicas'] - 1}"
            if not is_dns1123_label(pod_name):
                problems.append(f"pod {pod_name!r} is not a DNS-1123 label")
    return problems


@pytest.fixture
def validator(crds_dir):
    from sandbox.validation import Validator

    return Validator(crd_dirs=[crds_dir])


@pytest.mark.parametrize(("kind", "scheduler"), KINDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES, job_id=IDS, workers=st.integers(min_value=1, max_value=MAX_WORKERS))
@example(name="1st-run", job_id=908, workers=2)
@example(name="9" * 40, job_id=2**63 - 1, workers=MAX_WORKERS)
@example(name="a" * 40, job_id=123456789, workers=1)
def test_every_object_of_every_job_name_is_valid(kind, scheduler, name, job_id, workers, validator):
    object_name = job_object_name(name, job_id)
    objects = job_manifests(spec(name=object_name, job_id=job_id, kind=kind, scheduler=scheduler,
                                 workers=workers, gpus_per_worker=1))
    for obj in objects:
        assert validator.validate(obj, strict=True) == [], obj["kind"]
        if "." not in obj["apiVersion"].split("/")[0] or obj["apiVersion"] == "v1":
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        assert name_problems(obj, workers) == []


@given(name=NAMES, job_id=IDS)
def test_object_names_are_deterministic_short_and_distinct_per_job(name, job_id):
    derived = job_object_name(name, job_id)
    assert derived == job_object_name(name, job_id)
    assert is_dns1035_label(derived) and len(derived) <= OBJECT_NAME_LIMIT
    assert derived != job_object_name(name, job_id + 1)


@pytest.mark.parametrize(("name", "job_id", "expected"), [
    ("train", 42, "train-42"),
    ("1st-run", 908, "x-1st-run-908"),
    ("a" * 40, 1234567, "a" * 38 + "-ea123dce"),
])
def test_object_name_examples(name, job_id, expected):
    assert job_object_name(name, job_id) == expected
