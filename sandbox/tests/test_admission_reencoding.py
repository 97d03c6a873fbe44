"""What the schedulers' mutating webhooks change by decoding an object and answering with it encoded again, as
the fidelity corpus found them doing with Kueue and Volcano running (bench/FIDELITY_CONTROLLERS.md)."""

import pytest

from sandbox.errors import ApiError

KUEUE, VOLCANO = "kueue.x-k8s.io/v1beta2", "scheduling.volcano.sh/v1beta1"


def _queue(memory):
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {"resourceGroups": [
        {"coveredResources": ["nvidia.com/gpu", "memory"], "flavors": [{"name": "h100", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": 8}, {"name": "memory", "nominalQuota": memory}]}]}]}}


def _quotas(obj) -> list:
    return [r["nominalQuota"] for r in obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"]]


def test_kueue_writes_a_new_cluster_queues_quantities_as_quantity_does(objects):
    # clusterqueue_webhook.go Default through controller-runtime's PatchResponseFromRaw: on create only.
    created = objects.create(_queue("1024Gi"))
    assert _quotas(created) == ["8", "1Ti"]
    rt = objects.rt(created)
    updated = objects.store.update(rt, {**created, **_queue("2048Gi"), "metadata": created["metadata"]}, None, "cq")
    assert _quotas(updated) == [8, "2048Gi"]


@pytest.mark.parametrize(("weight", "named"), [("2", "string"), (True, "bool"), (1.5, "number 1.5")])
def test_volcano_decodes_a_queue_before_its_schema_is_checked(objects, weight, named):
    # mutate_queue.go decodes the Queue (spec.weight an int32) before kube-apiserver validates the schema.
    queue = {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": weight}}
    error = objects.refused(queue, None)
    assert isinstance(error, ApiError) and (error.code, error.reason) == (400, "")
    assert error.message == ('admission webhook "mutatequeue.volcano.sh" denied the request: json: cannot unmarshal '
                             f"{named} into Go struct field QueueSpec.spec.weight of type int32")
    assert objects.create({**queue, "spec": {"weight": 2}}, None, dry_run=True)["spec"]["weight"] == 2
