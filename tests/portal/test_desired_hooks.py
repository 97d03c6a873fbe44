"""The desired-state registry's hooks compose as they promise: each contribution prepares the cluster's objects in
turn, splits the levels before it further, and says whether the cluster must be looked at again soon."""

import pytest

from portal import desired


def _queue(name, parent=""):
    return {"kind": "Queue", "metadata": {"name": name}, "spec": {"parent": parent} if parent else {}}


@pytest.fixture
def only(monkeypatch):
    def register(*contributions):
        monkeypatch.setattr(desired, "_contributions", {c.name: c for c in contributions})

    return register


def test_without_hooks_the_plan_is_as_built_and_applied_at_once(only):
    only(desired.Contribution(name="plain"))
    objects = [_queue("a"), _queue("b", "a")]
    assert desired.cluster_prepared(cluster=None, desired=objects, actual=[], widen=True) == objects
    assert desired.cluster_apply_levels(cluster=None, objects=objects) == [objects]
    assert desired.cluster_apply_levels(cluster=None, objects=[]) == []
    assert not desired.cluster_unsettled(cluster=None)


def test_hooks_run_in_registration_order_and_split_levels_further(only):
    calls = []

    def prepare(name):
        def hook(cluster, objects, actual, *, widen):
            calls.append((name, widen))
            return objects + [_queue(name)]
        return hook

    by_parent = desired.Contribution(
        name="first", prepare=prepare("first"), unsettled=lambda cluster: False,
        order=lambda cluster, objects, *, children_first: [
            [o for o in objects if not o["spec"]], [o for o in objects if o["spec"]]][::-1 if children_first else 1])
    by_name = desired.Contribution(
        name="second", prepare=prepare("second"), unsettled=lambda cluster: True,
        order=lambda cluster, objects, *, children_first: [[o] for o in sorted(objects,
                                                                              key=lambda o: o["metadata"]["name"])])
    only(by_parent, by_name)
    prepared = desired.cluster_prepared(cluster=None, desired=[_queue("c", "b")], actual=[], widen=True)
    assert calls == [("first", True), ("second", True)]
    assert [o["metadata"]["name"] for o in prepared] == ["c", "first", "second"]
    levels = desired.cluster_apply_levels(cluster=None, objects=prepared, children_first=True)
    assert [[o["metadata"]["name"] for o in level] for level in levels] == [["c"], ["first"], ["second"]]
    assert desired.cluster_unsettled(cluster=None)
