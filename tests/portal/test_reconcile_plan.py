import pytest

from portal.reconcile import APPLIED_HASH_ANNOTATION, is_subset, owned_fields, plan, with_applied_hash


def ns(name, **labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def netpol(name, namespace, spec=None):
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec or {"podSelector": {}}}


def live(obj, **extra_meta):
    """What a server returns after the portal applied `obj`: its fields plus metadata, defaults and status."""
    obj = with_applied_hash(obj)
    result = {**obj, "metadata": {**obj["metadata"], "uid": "u", "resourceVersion": "7", **extra_meta},
              "status": {"phase": "Active"}}
    result["metadata"]["labels"] = {**obj["metadata"].get("labels", {}), "kubernetes.io/metadata.name": "x"}
    return result


@pytest.mark.parametrize(
    ("desired", "actual", "expected"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, True),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2], "c": 0}}, True),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, False),
        ({"a": [{"x": 1}]}, {"a": [{"x": 1, "y": 2}]}, True),
        ({"a": "4"}, {"a": 4}, True),
        ({"a": True}, {"a": "True"}, False),
        ({"a": 1}, {}, False),
        ({"a": {}, "b": []}, {}, True),
        ({"a": {}}, {"a": {"x": 1}}, True),
    ],
)
def test_is_subset(desired, actual, expected):
    assert is_subset(desired, actual) is expected


@pytest.mark.parametrize(
    ("name", "desired", "actual", "apply", "delete", "unchanged"),
    [
        ("missing objects are applied", [ns("a")], [], ["a"], [], []),
        ("server-added fields are not drift", [ns("a", team="t")], [live(ns("a", team="t"))], [], [], ["a"]),
        ("a changed label is drift", [ns("a", team="t")], [live(ns("a", team="u"))], ["a"], [], []),
        ("objects no longer wanted are pruned", [], [live(netpol("p", "a"))], [], ["p"], []),
        ("an object being deleted is applied again", [ns("a")], [live(ns("a"), deletionTimestamp="now")], ["a"],
         [], []),
        ("a deleted namespace takes its content with it", [], [live(ns("a")), live(netpol("p", "a"))], [], ["a"],
         []),
        ("namespaces are deleted after objects elsewhere", [], [live(ns("a")), live(netpol("p", "b"))], [],
         ["p", "a"], []),
    ],
)
def test_plan(name, desired, actual, apply, delete, unchanged):
    result = plan(desired, actual)
    assert [o["metadata"]["name"] for o in result.apply] == apply, name
    assert [o["metadata"]["name"] for o in result.delete] == delete, name
    assert [o["metadata"]["name"] for o in result.unchanged] == unchanged, name


def quota(hard):
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "t"},
            "spec": {"hard": hard}}


def managed(obj, fields_v1, manager="gpu-portal"):
    """`obj` as a server holds it, with `fields_v1` owned by `manager` through apply."""
    result = live(obj)
    result["metadata"]["managedFields"] = [
        {"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:status": {"f:used": {}}}, "subresource": "status"},
        {"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields_v1},
    ]
    return result


# A real API server's record of the portal's apply of quota({"requests.cpu": "64", "requests.nvidia.com/gpu": "8"}),
# with its `.` markers and the hash annotation.
QUOTA_FIELDS = {
    "f:metadata": {"f:annotations": {".": {}, f"f:{APPLIED_HASH_ANNOTATION}": {}}},
    "f:spec": {"f:hard": {".": {}, "f:requests.cpu": {}, "f:requests.nvidia.com/gpu": {}}},
}


def test_owned_fields_reads_real_server_field_sets():
    containers = {"f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}}},
                             "f:tolerations": {}, "f:nodeSelector": {".": {}}}}
    obj = managed(quota({}), containers)
    assert owned_fields(obj, "gpu-portal") == {("spec", "containers"), ("spec", "tolerations"),
                                               ("spec", "nodeSelector")}
    assert owned_fields(obj, "someone-else") is None
    assert owned_fields(live(quota({})), "gpu-portal") is None


def test_a_field_given_back_is_applied_away_even_with_the_same_hash():
    # The live object is a superset of what is wanted: only managedFields says requests.cpu is ours to remove.
    wanted = quota({"requests.nvidia.com/gpu": "8"})
    was = managed(wanted, QUOTA_FIELDS)
    was["spec"]["hard"]["requests.cpu"] = "64"
    assert [o["kind"] for o in plan([wanted], [was]).apply] == ["ResourceQuota"]
    # Another manager's field is not ours to remove: nothing to do.
    theirs = managed(wanted, {**QUOTA_FIELDS, "f:spec": {"f:hard": {"f:requests.nvidia.com/gpu": {}}}})
    theirs["spec"]["hard"]["requests.cpu"] = "64"
    assert plan([wanted], [theirs]).empty


def test_a_changed_wish_is_applied_though_the_live_object_is_a_superset():
    before = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": "t"},
              "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "8", "nvidia.com/mig": "1"}}]}}
    after = {**before, "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "8"}}]}}
    assert plan([after], [live(before)]).apply  # a key left inside an atomic list item
    assert plan([after], [live(after)]).empty


def test_an_empty_map_declared_whole_removes_what_was_under_it():
    wanted = quota({})
    was = managed(quota({"requests.cpu": "64"}), QUOTA_FIELDS)
    was["metadata"]["annotations"] = live(wanted)["metadata"]["annotations"]
    assert plan([wanted], [was]).apply
