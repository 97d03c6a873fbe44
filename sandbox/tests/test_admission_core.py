"""The API server's own validation and defaulting of core kinds, one test per rule.

Rules: Kubernetes pkg/apis/core/validation/validation.go, pkg/apis/core/v1/defaults.go,
pkg/apis/batch/validation/validation.go and pkg/apis/batch/v1/defaults.go (cited per test).
"""

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException


def _pod(name="p", **container):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36", **container}]}}


def _job(name="train", restart="Never", **spec):
    pod = {"containers": [{"name": "main", "image": "trainer:2"}], **({"restartPolicy": restart} if restart else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": pod}, **spec}}


def _messages(error) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in error.details.get("causes", [])]


def test_service_names_are_dns1035_labels(k8s):
    # ValidateServiceName = NameIsDNS1035Label: a Service name must start with a letter.
    core = client.CoreV1Api(k8s)
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_service("default", {"metadata": {"name": "7b-model"},
                                                   "spec": {"ports": [{"port": 80}]}})
    body = json.loads(exc.value.body)
    assert exc.value.status == 422
    assert body["message"] == (
        'Service "7b-model" is invalid: metadata.name: Invalid value: "7b-model": a DNS-1035 label must consist of '
        "lower case alphanumeric characters or '-', start with an alphabetic character, and end with an "
        "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
        "'[a-z]([-a-z0-9]*[a-z0-9])?')")
    core.create_namespaced_service("default", {"metadata": {"name": "model-7b"}, "spec": {"ports": [{"port": 80}]}})


def test_env_var_names_are_printable_ascii_without_equals(objects):
    # validateEnv with RelaxedEnvironmentVariableValidation (beta, on by default since 1.32).
    error = objects.refused(_pod(env=[{"name": "A=B", "value": "1"}, {"name": "", "value": "2"}]))
    assert error.code == 422
    assert _messages(error) == [
        "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist "
        "only of printable ASCII characters other than '='",
        "spec.containers[0].env[1].name: Required value"]
    objects.create(_pod("dotted", env=[{"name": "my.env-name", "value": "1"}]), dry_run=True)


def test_env_value_and_value_from_are_exclusive(objects):
    # validateEnvVarValueFrom: "may not be specified when `value` is not empty".
    error = objects.refused(_pod(env=[{"name": "A", "value": "1", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.name"}}}]))
    assert "may not be specified when `value` is not empty" in error.message


def test_container_names_are_unique_labels(objects):
    # validateContainers: names are DNS-1123 labels, unique across containers and init containers.
    pod = _pod()
    pod["spec"]["initContainers"] = [{"name": "main", "image": "busybox"}]
    pod["spec"]["containers"].append({"name": "Side_Car", "image": "busybox"})
    messages = _messages(objects.refused(pod))
    assert 'spec.initContainers[0].name: Duplicate value: "main"' in messages
    assert any(m.startswith('spec.containers[1].name: Invalid value: "Side_Car": a lowercase RFC 1123 label')
               for m in messages)


def test_container_ports_and_port_names(objects):
    # validateContainerPorts: 1-65535, IANA_SVC_NAME names, unique per container.
    error = objects.refused(_pod(ports=[{"containerPort": 70000}, {"containerPort": 80, "name": "http_port"}]))
    messages = _messages(error)
    assert "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, " \
           "inclusive" in messages
    assert 'spec.containers[0].ports[1].name: Invalid value: "http_port": must contain only alpha-numeric ' \
           "characters (a-z, 0-9), and hyphens (-)" in messages


def test_requests_may_not_exceed_limits(objects):
    # ValidateResourceRequirements: a request above its limit is invalid, reported at the requests map (reqPath,
    # not the resource's key), with the quantities as Quantity.String() writes them.
    error = objects.refused(_pod(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "0.5"}}))
    assert _messages(error) == ['spec.containers[0].resources.requests: Invalid value: "2": must be less than '
                                "or equal to cpu limit of 500m"]


def test_extended_resources_need_equal_limits(objects):
    # ValidateResourceRequirements: extended resources cannot be overcommitted.
    error = objects.refused(_pod(resources={"requests": {"nvidia.com/gpu": "1"}}))
    assert _messages(error) == ["spec.containers[0].resources.limits: Required value: Limit must be set for non "
                                "overcommitable resources"]
    error = objects.refused(_pod(resources={"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}))
    assert "must be equal to nvidia.com/gpu limit of 2" in error.message


def test_container_resource_names(objects):
    # validateContainerResourceName: bare names must be standard container resources.
    error = objects.refused(_pod(resources={"limits": {"gpu": "1"}}))
    assert 'spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource for ' \
           "containers" in _messages(error)


def test_pod_defaults(objects):
    # SetDefaults_PodSpec / SetDefaults_Container / SetDefaults_ContainerPort.
    pod = objects.create(_pod("defaults", image="busybox", ports=[{"containerPort": 80}]), dry_run=True)
    spec, ctr = pod["spec"], pod["spec"]["containers"][0]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"], spec["terminationGracePeriodSeconds"]) \
        == ("Always", "ClusterFirst", "default-scheduler", 30)
    assert (ctr["imagePullPolicy"], ctr["terminationMessagePath"], ctr["ports"][0]["protocol"]) == \
        ("Always", "/dev/termination-log", "TCP")
    tagged = objects.create(_pod("tagged", image="busybox:1.36"), dry_run=True)
    assert tagged["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_job_restart_policy(objects):
    # validateJobSpec: a Job's pods restart OnFailure or Never; unset defaults to Always, which is refused.
    error = objects.refused(_job(restart=None))
    assert _messages(error) == ['spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", '
                                '"Never"']


def test_indexed_job_needs_completions(objects):
    # validateJobSpec: completionMode Indexed requires spec.completions; parallelism at most 100000.
    error = objects.refused(_job(completionMode="Indexed", parallelism=4))
    assert _messages(error) == ["spec.completions: Required value: when completion mode is Indexed"]
    error = objects.refused(_job(completionMode="Indexed", completions=200000, parallelism=200000))
    assert "must be less than or equal to 100000 when completion mode is Indexed" in error.message
    objects.create(_job("indexed", completionMode="Indexed", completions=4, parallelism=4), dry_run=True)


def test_backoff_limit_per_index_requires_indexed(objects):
    # validateJobSpec: backoffLimitPerIndex only with Indexed completion mode.
    error = objects.refused(_job(backoffLimitPerIndex=1))
    assert "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode" in _messages(error)


def test_job_defaults(objects):
    # SetDefaults_Job: completions and parallelism 1, backoffLimit 6, NonIndexed, not suspended.
    job = objects.create(_job("defaults"), dry_run=True)
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"], spec["completionMode"],
            spec["suspend"], spec["podReplacementPolicy"]) == (1, 1, 6, "NonIndexed", False, "TerminatingOrFailed")


def test_started_job_template_is_immutable(objects):
    # ValidateJobSpecUpdate: the pod template is immutable unless the job is suspended.
    objects.create(_job("running"))
    error = objects.patch_refused(_job("running"), {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "trainer:3"}]}}}})
    assert error.code == 422 and 'spec.template: Invalid value: "object": field is immutable' in error.message
    objects.create(_job("held", suspend=True))
    objects.patch(_job("held"), {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "trainer:3"}]}}}})


def _quota(name="q", **hard):
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": {"hard": hard}}


def test_quota_resource_names(objects):
    # ValidateResourceQuotaResourceName: bare names must be standard quota resources; prefixed ones qualified.
    error = objects.refused(_quota(gpu="4"))
    assert _messages(error) == [
        'spec.hard[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified',
        'spec.hard[gpu]: Invalid value: "gpu": must be a standard resource for quota']
    objects.create(_quota(**{"requests.nvidia.com/gpu": "4", "count/jobs.batch": "10", "limits.cpu": "8"}),
                   dry_run=True)


def test_quota_scopes_may_not_conflict(objects):
    # validateResourceQuotaScopes: BestEffort with NotBestEffort (or Terminating with NotTerminating) conflicts.
    quota = _quota(pods="4")
    quota["spec"]["scopes"] = ["BestEffort", "NotBestEffort"]
    # The scopes are shown as Go's field errors show a list: JSON.
    assert 'spec.scopes: Invalid value: ["BestEffort","NotBestEffort"]: conflicting scopes' in \
        _messages(objects.refused(quota))


def _limit_range(name="lr", **item):
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name}, "spec": {"limits": [item]}}


def test_limit_range_bounds_are_ordered(objects):
    # ValidateLimitRange: min <= defaultRequest <= default <= max.
    error = objects.refused(_limit_range(type="Container", min={"cpu": "2"}, max={"cpu": "1"}))
    assert 'spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1' in \
        _messages(error)
    error = objects.refused(_limit_range(type="Container", max={"cpu": "1"}, default={"cpu": "2"}))
    assert "default value 2 is greater than max value 1" in error.message
    error = objects.refused(_limit_range(type="Container", default={"cpu": "1"}, defaultRequest={"cpu": "2"}))
    assert "default request value 2 is greater than default limit value 1" in error.message


def test_limit_range_pod_type_has_no_defaults(objects):
    # ValidateLimitRange: `default` may not be specified when type is Pod; a type appears once.
    item = {"type": "Pod", "max": {"cpu": "4"}, "default": {"cpu": "1"}}
    lr = _limit_range(**item)
    lr["spec"]["limits"].append({"type": "Pod", "max": {"cpu": "4"}})
    messages = _messages(objects.refused(lr))
    assert "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'" in messages
    assert 'spec.limits[1].type: Duplicate value: "Pod"' in messages


def test_limit_range_container_defaults(objects):
    # SetDefaults_LimitRangeItem: default <- max, defaultRequest <- default (a GPU max hands every container that
    # many GPUs by default).
    created = objects.create(_limit_range("gpu", type="Container", max={"nvidia.com/gpu": "8"}, min={"cpu": "1"}),
                             dry_run=True)
    item = created["spec"]["limits"][0]
    assert item["default"] == {"nvidia.com/gpu": "8"}
    assert item["defaultRequest"] == {"nvidia.com/gpu": "8", "cpu": "1"}
