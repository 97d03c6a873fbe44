import pytest

from portal.reconcile import is_subset, plan


def ns(name, **labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def netpol(name, namespace, spec=None):
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec or {"podSelector": {}}}


def live(obj, **extra_meta):
    """What a server returns: our fields plus metadata, defaults and status it adds."""
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
