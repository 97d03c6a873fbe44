"""The engine carries plans out through the gateway, with a plan's independent calls side by side, against a real
sandbox API server: a failing call answers for its own object and loses none of the others."""

import pytest

from portal import kube
from portal.reconcile import Plan, converge, converge_many, plan

OURS = {"app.kubernetes.io/managed-by": "converge-test"}
SELECTOR = "app.kubernetes.io/managed-by=converge-test"


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": OURS}}


def policy(ns, name):
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": ns, "labels": OURS},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}


def quota(ns):
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": ns, "labels": OURS},
            "spec": {"hard": {"pods": "10"}}}


def ours(client, namespace=None, kinds=("Namespace", "ResourceQuota", "NetworkPolicy")):
    """What the cluster holds of ours, as reconcile lists it (by label)."""
    api = {"Namespace": "v1", "ResourceQuota": "v1", "NetworkPolicy": "networking.k8s.io/v1"}
    return client.list_all([(api[kind], kind, None if kind == "Namespace" else namespace, SELECTOR)
                            for kind in kinds])


def team(ns, policies=4):
    return [namespace(ns), quota(ns)] + [policy(ns, f"p{i}") for i in range(policies)]


@pytest.fixture(params=[1, 4], ids=["one-at-a-time", "four-at-once"])
def client(request, sandbox, settings):
    settings.KUBE_CONCURRENCY = request.param
    kube.forget_clients()
    return kube.client_for(kube.Connection(mode="sandbox", server=sandbox.url))


def policies_in(client, ns):
    return sorted(o["metadata"]["name"] for o in client.list("networking.k8s.io/v1", "NetworkPolicy", namespace=ns))


def by_name(outcome):
    return {(s["kind"], s["name"]): (s["state"], s["message"]) for s in outcome.statuses}


def test_converge_applies_everything_and_a_second_pass_writes_nothing(client, sandbox):
    desired = team("a")
    outcome = converge(client, plan(desired, []))
    assert outcome.error is None and outcome.writes == 6
    assert {state for state, _ in by_name(outcome).values()} == {"applied"}
    assert policies_in(client, "a") == ["p0", "p1", "p2", "p3"]
    actual = ours(client, "a")
    sandbox.reset_stats()
    again = converge(client, plan(desired, actual))
    assert again.writes == 0 and sandbox.stats()["writes"] == 0


def test_a_fault_on_one_apply_does_not_lose_the_others(client, sandbox):
    sandbox.faults.add(verb="apply", resource="networkpolicies", name="p2", status=503, reason="ServiceUnavailable",
                       message="etcd is busy")
    outcome = converge(client, plan(team("a"), []))
    assert outcome.error is not None and outcome.error.status == 503 and outcome.error.transient
    states = by_name(outcome)
    assert states[("NetworkPolicy", "p2")] == ("failed", "503 ServiceUnavailable: etcd is busy")
    assert {name: state for (kind, name), (state, _) in states.items() if name != "p2"} == {
        "a": "applied", "q": "applied", "p0": "applied", "p1": "applied", "p3": "applied"}
    assert outcome.writes == 5
    assert policies_in(client, "a") == ["p0", "p1", "p3"]
    # Level-triggered: the retry finds what is there and applies only what is missing.
    actual = ours(client, "a")
    retry = converge(client, plan(team("a"), actual))
    assert retry.error is None and retry.writes == 1
    assert policies_in(client, "a") == ["p0", "p1", "p2", "p3"]


def test_each_failing_object_is_recorded_and_a_transient_error_decides_the_retry(client, sandbox):
    sandbox.faults.add(verb="apply", resource="networkpolicies", name="p0", status=422, reason="Invalid",
                       message="spec.podSelector: Invalid value")
    sandbox.faults.add(verb="apply", resource="networkpolicies", name="p3", status=503, reason="ServiceUnavailable")
    outcome = converge(client, plan(team("a"), []))
    failed = {name: message for (kind, name), (state, message) in by_name(outcome).items() if state == "failed"}
    assert set(failed) == {"p0", "p3"}
    assert "spec.podSelector: Invalid value" in failed["p0"]
    # Every call of the stage is made, one at a time or several at once; the transient failure makes the row
    # retry (repeating the 422 beside it, still shown on its object).
    assert outcome.error.status == 503 and outcome.error.transient


def test_a_failed_namespace_leaves_what_goes_in_it_waiting(client, sandbox):
    sandbox.faults.add(verb="apply", resource="namespaces", status=500, reason="InternalError")
    outcome = converge(client, plan(team("a"), []))
    assert outcome.writes == 0 and outcome.error.status == 500
    states = by_name(outcome)
    assert states[("Namespace", "a")][0] == "failed"
    assert {state for key, (state, _) in states.items() if key != ("Namespace", "a")} == {"waiting"}
    assert client.get("networking.k8s.io/v1", "NetworkPolicy", "p0", "a") is None


def test_plans_carried_out_together_keep_their_own_outcomes(client, sandbox):
    sandbox.faults.add(verb="apply", resource="networkpolicies", namespace="b", name="p1", status=403,
                       reason="Forbidden", message="networkpolicies is forbidden")
    outcomes = converge_many(client, [plan(team(ns), []) for ns in ("a", "b", "c")])
    assert [o.error is None for o in outcomes] == [True, False, True]
    assert [o.writes for o in outcomes] == [6, 5, 6]
    assert not outcomes[1].error.transient and "forbidden" in outcomes[1].error.message
    assert policies_in(client, "a") == policies_in(client, "c") == ["p0", "p1", "p2", "p3"]
    assert policies_in(client, "b") == ["p0", "p2", "p3"]


def test_prunes_run_after_applies_and_namespaces_go_last(client, sandbox):
    converge(client, plan(team("a") + team("b"), []))
    actual = ours(client, kinds=("Namespace", "NetworkPolicy"))
    outcome = converge(client, plan([o for o in team("a", policies=2) if o["kind"] != "ResourceQuota"], actual))
    assert outcome.error is None
    assert policies_in(client, "a") == ["p0", "p1"]
    namespaces = {o["metadata"]["name"]: o for o in client.list("v1", "Namespace")}
    assert "b" not in namespaces or namespaces["b"]["metadata"].get("deletionTimestamp")


def test_each_reports_cluster_errors_in_place_and_raises_bugs(client):
    def call(item):
        if item == "bug":
            raise ZeroDivisionError("a bug, not a cluster's answer")
        if item == "gone":
            raise kube.KubeError(404, "NotFound", "gone")
        return item * 2

    results = client.each(call, [1, "gone", 3])
    assert results[0] == 2 and results[2] == 6 and isinstance(results[1], kube.KubeError)
    with pytest.raises(ZeroDivisionError):
        client.each(call, [1, "bug", 3])


def test_list_all_raises_the_first_failing_list(client, sandbox):
    sandbox.faults.add(verb="list", resource="resourcequotas", status=503, reason="ServiceUnavailable")
    with pytest.raises(kube.KubeError) as failure:
        client.list_all([("v1", "Namespace", None, ""), ("v1", "ResourceQuota", "a", "")])
    assert failure.value.status == 503


def test_the_gateway_reaches_a_cluster_through_a_kubeconfig(sandbox, settings, tmp_path):
    sandbox.write_kubeconfig(tmp_path / "config", context="east")
    settings.KUBECONFIG = str(tmp_path / "config")
    kube.forget_clients()
    client = kube.client_for(kube.Connection(mode="kubeconfig", context="east"))
    assert client.reachable()[0]
    client.apply(namespace("k"))
    assert client.get("v1", "Namespace", "k")["metadata"]["name"] == "k"
    assert client.get("v1", "Namespace", "missing") is None
    with pytest.raises(kube.KubeError) as failure:
        client.apply({**policy("k", "bad"), "spec": {"podSelector": "not a selector"}})
    assert failure.value.status == 422 and not failure.value.transient


def test_an_unknown_kubeconfig_context_is_a_clear_error(sandbox, settings, tmp_path):
    sandbox.write_kubeconfig(tmp_path / "config", context="east")
    settings.KUBECONFIG = str(tmp_path / "config")
    kube.forget_clients()
    with pytest.raises(kube.KubeError) as failure:
        kube.client_for(kube.Connection(mode="kubeconfig", context="west"))
    assert failure.value.reason == "BadConnection" and "west" in failure.value.message


def test_plan_of_nothing_is_carried_out_with_no_call(client, sandbox):
    sandbox.reset_stats()
    assert converge(client, Plan()).writes == 0
    assert converge_many(client, []) == []
    assert sandbox.stats()["requests"] == 0


def test_a_keep_alive_connection_closed_while_idle_is_opened_again(client, sandbox):
    import socket

    client.apply(namespace("idle"))
    for conn in client._connections._idle:
        conn.sock.shutdown(socket.SHUT_RDWR)  # as when the API server drops an idle connection
    sandbox.reset_stats()
    client.apply(namespace("idle"))
    assert sandbox.stats()["requests"] == 1
    assert client.get("v1", "Namespace", "idle")["metadata"]["name"] == "idle"
