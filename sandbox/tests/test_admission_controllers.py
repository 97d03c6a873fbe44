"""The installed controllers' admission webhooks, one test per rule, with fixtures written after upstream's samples
(Volcano example/ and example/invalid_jobs/*-webhook-deny.yaml, Kueue site/static/examples, KubeRay
v1.7.0 ray-operator/config/samples). Each test names the upstream file its rule comes from."""

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from sandbox.testing import api_client

KUEUE, VOLCANO = "kueue.x-k8s.io/v1beta2", "scheduling.volcano.sh/v1beta1"


# Kueue: pkg/webhooks/clusterqueue_webhook.go, common.go, cohort_webhook.go ------------------------------------

def _cq(name="cq", cohort=None, **quota):
    resources = [{"name": "nvidia.com/gpu", "nominalQuota": 8, **quota}]
    spec = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                "flavors": [{"name": "h100", "resources": resources}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def test_kueue_lending_limit_at_most_nominal(objects):
    # common.go validateLendingLimit: "must be less than or equal to the nominalQuota".
    error = objects.refused(_cq(cohort="org", lendingLimit=9))
    assert error.code == 403 and error.reason == "Forbidden"
    assert error.message == ('admission webhook "vclusterqueue.kb.io" denied the request: spec.resourceGroups[0]'
                             '.flavors[0].resources[0].lendingLimit: Invalid value: "9": must be less than or equal '
                             "to the nominalQuota")
    objects.create(_cq(cohort="org", lendingLimit=8), dry_run=True)


def test_kueue_resources_follow_covered_resources(objects):
    # common.go validateFlavorQuotas: each flavor lists the covered resources in their order.
    queue = _cq()
    group = queue["spec"]["resourceGroups"][0]
    group["coveredResources"] = ["cpu", "nvidia.com/gpu"]
    group["flavors"][0]["resources"] = [{"name": "nvidia.com/gpu", "nominalQuota": 8},
                                        {"name": "cpu", "nominalQuota": 64}]
    error = objects.refused(queue)
    assert 'resources[0].name: Invalid value: "nvidia.com/gpu": must match the name in coveredResources' \
        in error.message


def test_kueue_flavors_unique_across_groups(objects):
    # common.go validateResourceGroups: a flavor appears in one resource group once.
    queue = _cq()
    queue["spec"]["resourceGroups"].append({"coveredResources": ["cpu"], "flavors": [
        {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": 1}]}]})
    error = objects.refused(queue)
    assert 'spec.resourceGroups[1].flavors[0].name: Duplicate value: "h100"' in error.message


def test_kueue_admission_check_on_unknown_flavor(objects):
    # clusterqueue_webhook.go validateAdmissionCheckOnFlavors: onFlavors must name the queue's flavors.
    queue = _cq()
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov", "onFlavors": ["a100"]}]}
    error = objects.refused(queue)
    assert 'onFlavors[0]: Unsupported value: "a100": supported values: "h100"' in error.message


def test_kueue_cohort_limits_need_a_parent(objects):
    # cohort_webhook.go validateCohort with validateLimit: "must be nil when parent is empty".
    cohort = {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "org"},
              "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                  {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8,
                                                  "borrowingLimit": 2}]}]}]}}
    error = objects.refused(cohort)
    assert error.message.startswith('admission webhook "vcohort.kb.io" denied the request:')
    assert "borrowingLimit: Invalid value: \"2\": must be nil when parent is empty" in error.message


def test_kueue_cluster_queue_finalizer(objects):
    # clusterqueue_webhook.go Default adds kueue.x-k8s.io/resource-in-use; the controller drops it on deletion once
    # no workload reserves quota in the queue (clusterqueue_controller.go, cache ClusterQueueEmpty).
    created = objects.create(_cq("finalized"))
    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    rt = objects.rt(created)
    objects.store.delete(rt, None, "finalized")
    assert objects.store._stored(rt, None, "finalized") is None


def _named(objects, kind, name):
    return objects.store._stored(objects.store.kind(KUEUE, kind), None, name)


def test_kueue_objects_in_use_stay_terminating_until_released(objects):
    """resourceflavor_webhook.go Default and topology_controller.go add the resource-in-use finalizer; a flavor
    being deleted keeps it while a ClusterQueue lists it (resourceflavor_controller.go), a Topology while a flavor
    names it (topology_controller.go), a ClusterQueue while a workload reserves quota in it."""
    store = objects.store
    objects.create({"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": "racks"},
                    "spec": {"levels": [{"nodeLabel": "example.com/rack"}]}})
    for name in ("h100", "a100"):
        flavor = objects.create({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name},
                                 "spec": {"nodeLabels": {"example.com/pool": name}, "topologyName": "racks"}})
        assert flavor["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert _named(objects, "Topology", "racks")["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    queue = _cq("team-a")
    queue["spec"]["resourceGroups"][0]["flavors"].append(
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]})
    objects.create(queue)
    workload = objects.create({
        "apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "train"},
        "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "x/y:1"}]}}}]}})
    workload["status"] = {"admission": {"clusterQueue": "team-a", "podSetAssignments": [{"name": "main"}]},
                          "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                          "message": "", "lastTransitionTime": "2026-11-25T00:00:00Z"}]}
    wl_rt = store.kind(KUEUE, "Workload")
    store.update(wl_rt, workload, "default", "train", subresource="status")
    gone = (("Topology", "racks"), ("ResourceFlavor", "h100"), ("ResourceFlavor", "a100"), ("ClusterQueue", "team-a"))
    for kind, name in gone:
        store.delete(store.kind(KUEUE, kind), None, name)
        assert _named(objects, kind, name)["metadata"]["deletionTimestamp"], kind  # Terminating: still in use
    store.delete(wl_rt, "default", "train")  # the workload goes: the queue, then both flavors, then the Topology
    for kind, name in gone:
        assert _named(objects, kind, name) is None, kind


def test_kueue_resource_flavor_taints_unique_and_labels_valid(objects):
    # resourceflavor_webhook.go validateNodeTaints / ValidateLabels.
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "spot"},
              "spec": {"nodeLabels": {"pool": "spot nodes"},
                       "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"},
                                      {"key": "spot", "value": "false", "effect": "NoSchedule"}]}}
    error = objects.refused(flavor)
    assert error.message.startswith('admission webhook "vresourceflavor.kb.io" denied the request: [')
    assert 'spec.nodeLabels[pool]: Invalid value: "spot nodes": a valid label must be an empty string' in error.message
    assert "spec.nodeTaints[1]: Duplicate value: \"object\": taints must be unique by key and effect pair" \
        in error.message
    flavor["spec"]["nodeLabels"] = {"pool": "spot"}
    flavor["spec"]["nodeTaints"][1]["effect"] = "NoExecute"
    objects.create(flavor, dry_run=True)


def _batch_job(name="train", labels=None, **spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "trainer:2"}]}}, **spec}}


def test_kueue_queue_name_label_is_a_subdomain(objects):
    # jobframework/validation.go ValidateQueueName (vjob.kb.io).
    error = objects.refused(_batch_job(labels={"kueue.x-k8s.io/queue-name": "Team_A"}))
    assert error.code == 403
    assert error.message.startswith('admission webhook "vjob.kb.io" denied the request: metadata.labels'
                                    '[kueue.x-k8s.io/queue-name]: Invalid value: "Team_A": a lowercase RFC 1123 '
                                    "subdomain")


def test_kueue_queue_name_immutable_while_running(objects):
    # jobframework/validation.go validateUpdateForQueueName: immutable unless the job is suspended.
    objects.create(_batch_job("queued", labels={"kueue.x-k8s.io/queue-name": "a"}, suspend=False))
    error = objects.patch_refused(_batch_job("queued"), {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "b"}}})
    assert 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable' in error.message
    objects.create(_batch_job("held", labels={"kueue.x-k8s.io/queue-name": "a"}, suspend=True))
    objects.patch(_batch_job("held"), {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "b"}}})


def test_kueue_max_exec_time_label_positive(objects):
    # jobframework/validation.go validateCreateForMaxExecTime.
    error = objects.refused(_batch_job(labels={"kueue.x-k8s.io/max-exec-time-seconds": "0"}))
    assert "Invalid value: 0: should be greater than 0" in error.message


def _ray_job(name="rayjob-sample", labels=None, **spec):
    cluster = {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
        {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"entrypoint": "python /home/ray/samples/sample_code.py", "rayClusterSpec": cluster, **spec}}


def test_kueue_ray_job_must_shut_down_its_cluster(objects):
    # jobs/rayjob/rayjob_webhook.go validateCreate: a queued RayJob deletes its cluster when finished.
    error = objects.refused(_ray_job(labels={"kueue.x-k8s.io/queue-name": "a"}))
    assert error.message == ('admission webhook "vrayjob.kb.io" denied the request: spec.shutdownAfterJobFinishes: '
                             "Invalid value: false: a kueue managed job should delete the cluster after finishing")
    objects.create(_ray_job(labels={"kueue.x-k8s.io/queue-name": "a"}, shutdownAfterJobFinishes=True), dry_run=True)


def test_kueue_ray_job_autoscaling_only_elastic(objects):
    # jobs/raycluster/common.go ValidateCreate: in-tree autoscaling only with workload slicing (elastic-job).
    job = _ray_job(labels={"kueue.x-k8s.io/queue-name": "a"}, shutdownAfterJobFinishes=True)
    job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    assert "a kueue managed job should only use autoscaling" in objects.refused(job).message
    job["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    objects.create(job, dry_run=True)


def test_kueue_ray_job_needs_a_cluster(objects):
    # jobs/rayjob/rayjob_webhook.go: neither clusterSelector nor rayClusterSpec is refused.
    job = _ray_job(labels={"kueue.x-k8s.io/queue-name": "a"})
    del job["spec"]["rayClusterSpec"]
    assert "spec.rayClusterSpec: Required value: rayClusterSpec is required" in objects.refused(job).message


# KubeRay: ray-operator/controllers/ray/utils/validation.go, pkg/webhooks/v1 ----------------------------------

def test_kuberay_ray_job_name_length(objects):
    # ValidateRayJobMetadata: at most 47 characters (the cluster's name adds a suffix).
    name = "a" * 48
    error = objects.refused(_ray_job(name))
    assert error.code == 422 and error.reason == "Invalid"
    assert error.message == (f'admission webhook "vrayjob.kb.io" denied the request: RayJob.ray.io "{name}" is '
                             f'invalid: metadata.name: Invalid value: "{name}": The RayJob metadata is invalid: '
                             "RayJob name should be no more than 47 characters")
    objects.create(_ray_job("a" * 47), dry_run=True)


def test_kuberay_ray_job_name_dns1035(objects):
    # ValidateRayJobMetadata: the name is a DNS-1035 label (no leading digit).
    error = objects.refused(_ray_job("7b-finetune"))
    assert "RayJob name should be a valid DNS1035 label" in error.message


def test_kuberay_worker_group_names_unique(objects):
    # webhooks/v1/raycluster_webhook.go validateWorkerGroups.
    worker = {"groupName": "gpu", "replicas": 1, "rayStartParams": {},
              "template": {"spec": {"containers": [{"name": "w", "image": "rayproject/ray:2.52.0"}]}}}
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "raycluster"},
               "spec": {"headGroupSpec": _ray_job()["spec"]["rayClusterSpec"]["headGroupSpec"],
                        "workerGroupSpecs": [worker, dict(worker)]}}
    error = objects.refused(cluster)
    assert 'spec.workerGroupSpecs[1]: Invalid value: "object": worker group names must be unique' in error.message


# Volcano: pkg/webhooks/admission/jobs/{mutate,validate}, queues/{mutate,validate} ------------------------------

def _vcjob(name="job-1", queue=None, tasks=None, **spec):
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "nginx", "image": "nginx:1.27"}]}}
    tasks = tasks if tasks is not None else [{"replicas": 2, "name": "task-1", "template": template}]
    body = {"tasks": tasks, **spec}
    if queue:
        body["queue"] = queue
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": body}


def _task(name, replicas=1, **extra):
    return {"name": name, "replicas": replicas, "template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "nginx", "image": "nginx:1.27"}]}}, **extra}


def test_volcano_job_defaults(objects):
    # mutate_job.go createPatch: default queue, volcano scheduler, maxRetry 3 (also when 0), task names and
    # minAvailable, the svc plugin with pytorch.
    job = _vcjob("defaults", tasks=[_task("", 2), _task("", 3)], maxRetry=0, plugins={"pytorch": []})
    created = objects.create(job, dry_run=True)
    spec = created["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"], spec["minAvailable"]) == \
        ("default", "volcano", 3, 5)
    assert [(t["name"], t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [("default0", 2, 3),
                                                                                       ("default1", 3, 3)]
    assert spec["plugins"] == {"pytorch": [], "svc": []}


def test_volcano_min_available_within_replicas(objects):
    # admit_job.go validateJobCreate (example/invalid_jobs/minAvailable-webhook-deny.yaml).
    error = objects.refused(_vcjob(minAvailable=3))
    assert error.code == 400
    assert error.message == ('admission webhook "validatejob.volcano.sh" denied the request: job \'minAvailable\' '
                             "should not be greater than total replicas in tasks;")


def test_volcano_task_names_unique(objects):
    # admit_job.go (example/invalid_jobs/duplicatedTaskName-webhook-deny.yaml).
    error = objects.refused(_vcjob(tasks=[_task("task-1"), _task("task-1")]))
    assert error.message.endswith("duplicated task name task-1;")


def test_volcano_policy_events_unique(objects):
    # util.go validatePolicies (example/invalid_jobs/duplicatedPolicyEvent-webhook-deny.yaml).
    job = _vcjob(policies=[{"event": "PodFailed", "action": "AbortJob"},
                           {"event": "PodFailed", "action": "RestartJob"}])
    assert "duplicate event PodFailed  across different policy" in objects.refused(job).message


def test_volcano_policy_event_and_exit_code_exclusive(objects):
    # util.go validatePolicies: event and exitCode together are refused; exit code 0 is no error code.
    job = _vcjob(policies=[{"event": "PodFailed", "exitCode": 3, "action": "AbortJob"}])
    assert "must not specify event and exitCode simultaneously" in objects.refused(job).message
    job = _vcjob(policies=[{"exitCode": 0, "action": "AbortJob"}])
    assert "0 is not a valid error code" in objects.refused(job).message


def test_volcano_unknown_plugin(objects):
    # admit_job.go: every plugin must be a registered job plugin.
    assert "unable to find job plugin: horovod;" in objects.refused(_vcjob(plugins={"horovod": []})).message


def test_volcano_job_queue_must_exist_open_and_leaf(objects):
    # admit_job.go: the queue exists, is Open, is not root and has no children.
    assert 'unable to find job queue: queue.scheduling.volcano.sh "nowhere" not found;' in \
        objects.refused(_vcjob(queue="nowhere")).message
    assert "can not submit job to root queue;" in objects.refused(_vcjob(queue="root")).message
    objects.create({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "dept"}, "spec": {}})
    objects.create({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "team"},
                    "spec": {"parent": "dept"}})
    assert "can only submit job to leaf queue, queue `dept` has 1 child queues;" in \
        objects.refused(_vcjob(queue="dept")).message
    objects.create(_vcjob(queue="team"), dry_run=True)


def test_volcano_job_update_limited(objects):
    # admit_job.go validateJobUpdate: only minAvailable, tasks' replicas/minAvailable and priorityClassName change.
    objects.create(_vcjob("updatable"))
    objects.patch(_vcjob("updatable"), {"spec": {"minAvailable": 1}})
    error = objects.patch_refused(_vcjob("updatable"), {"spec": {"maxRetry": 5}})
    assert error.message.endswith("job updates may not change fields other than `minAvailable`, "
                                  "`tasks[*].replicas under spec` and `PriorityClassName`")


def test_volcano_queue_defaults_and_state(objects):
    # mutate_queue.go: reclaimable true, weight 1; the queue controller opens a new queue.
    objects.create({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "fresh"}, "spec": {}})
    stored = objects.store.get(objects.store.kind(VOLCANO, "Queue"), None, "fresh")
    assert stored["spec"]["reclaimable"] is True and stored["spec"]["weight"] == 1
    assert stored["status"]["state"] == "Open"


def test_volcano_queue_guarantee_deserved_capability(objects):
    # validate_queue.go validateResourceQuantityOfQueue: guarantee <= deserved <= capability.
    queue = {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "bad"},
             "spec": {"capability": {"nvidia.com/gpu": "4"}, "deserved": {"nvidia.com/gpu": "8"},
                      "guarantee": {"resource": {"cpu": "2"}}}}
    error = objects.refused(queue)
    assert error.message.startswith('admission webhook "validatequeue.volcano.sh" denied the request: [')
    assert 'requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] must be >= guarantee[cpu]=2' \
        in error.message
    assert "deserved[nvidia.com/gpu]=8 must be <= capability[nvidia.com/gpu]=4" in error.message


def test_volcano_children_sums_within_parent(objects):
    # validate_queue.go validateSiblingsSum: the children's deserved stays within the parent's.
    objects.create({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "org"},
                    "spec": {"deserved": {"nvidia.com/gpu": "8"}, "capability": {"nvidia.com/gpu": "8"}}})
    objects.create({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "org-a"},
                    "spec": {"parent": "org", "deserved": {"nvidia.com/gpu": "6"}}})
    error = objects.refused({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "org-b"},
                             "spec": {"parent": "org", "deserved": {"nvidia.com/gpu": "4"}}})
    assert error.message == ('admission webhook "validatequeue.volcano.sh" denied the request: parent queue org '
                             "validation failed: sum of children's deserved (cpu 0.00, memory 0.00, nvidia.com/gpu "
                             "10000.00) exceeds parent's deserved limit (cpu 0.00, memory 0.00, nvidia.com/gpu "
                             "8000.00)")
    error = objects.refused({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "org-c"},
                             "spec": {"parent": "org", "capability": {"nvidia.com/gpu": "16"}}})
    # api.Resource keeps scalar resources in milli-units, and the message prints them so.
    assert "capability[nvidia.com/gpu]=16000.00 exceeds its ancestor's capability=8000.00" in error.message


def test_volcano_queue_parent_exists_and_is_not_itself(objects):
    # validate_queue.go validateHierarchicalQueue.
    error = objects.refused({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "self"},
                             "spec": {"parent": "self"}})
    assert error.message.endswith("queue self cannot use itself as parent")
    error = objects.refused({"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "orphan"},
                             "spec": {"parent": "ghost"}})
    assert 'failed to get parent queue of queue orphan: queue.scheduling.volcano.sh "ghost" not found' in \
        error.message


def test_volcano_queue_delete_rules(upstream_sandbox):
    # validate_queue.go validateQueueDeleting: default, root and queues with children stay (over HTTP: 400).
    custom = client.CustomObjectsApi(api_client(upstream_sandbox, retries=0))
    args = ("scheduling.volcano.sh", "v1beta1", "queues")
    with pytest.raises(ApiException) as exc:
        custom.delete_cluster_custom_object(*args, "default")
    assert exc.value.status == 400
    assert json.loads(exc.value.body)["message"] == ('admission webhook "validatequeue.volcano.sh" denied the '
                                                      "request: `default` queue can not be deleted")
    custom.create_cluster_custom_object(*args, {"apiVersion": VOLCANO, "kind": "Queue",
                                                "metadata": {"name": "parent"}, "spec": {}})
    custom.create_cluster_custom_object(*args, {"apiVersion": VOLCANO, "kind": "Queue",
                                                "metadata": {"name": "child"}, "spec": {"parent": "parent"}})
    with pytest.raises(ApiException) as exc:
        custom.delete_cluster_custom_object(*args, "parent")
    assert "queue parent can not be deleted because it has 1 child queues: child" in exc.value.body
    custom.delete_cluster_custom_object(*args, "child")
    custom.delete_cluster_custom_object(*args, "parent")


def test_webhooks_run_on_dry_run_and_apply(upstream_sandbox):
    # Admission runs for dry-run requests and for server-side apply as for create.
    k8s = api_client(upstream_sandbox, retries=0)
    custom = client.CustomObjectsApi(k8s)
    bad = _vcjob("dry", minAvailable=9)
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", "default", "jobs", bad, dry_run="All")
    assert exc.value.status == 400 and "validatejob.volcano.sh" in exc.value.body
    with pytest.raises(ApiException) as exc:
        k8s.call_api("/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/dry", "PATCH",
                     query_params=[("fieldManager", "test")], body=bad,
                     header_params={"Content-Type": "application/apply-patch+yaml"})
    assert exc.value.status == 400 and "should not be greater than total replicas" in exc.value.body


def test_a_custom_kind_is_selected_by_its_crds_selectable_fields(upstream_sandbox):
    """Kueue's Workload CRD exports .status.admission.clusterQueue (selectableFields); other fields are
    refused as the API server refuses any field a kind does not export."""
    api = client.CustomObjectsApi(api_client(upstream_sandbox))
    found = api.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "workloads",
                                              field_selector="status.admission.clusterQueue=team-a")
    assert found["items"] == []
    with pytest.raises(ApiException) as exc:
        api.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "workloads",
                                          field_selector="spec.queueName=team-a")
    assert exc.value.status == 400
    assert json.loads(exc.value.body)["message"] == (
        '"spec.queueName" is not a known field selector: only "metadata.name", "metadata.namespace"')
