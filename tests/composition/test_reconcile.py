"""Team namespace and cluster reconcile against a real sandbox API server, through the portal's gateway."""

from datetime import timedelta

import pytest
from django.utils import timezone

from composition import reconcile as orchestration
from portal import kube
from portal.reconciled import SyncState
from tenants import services
from tenants.choices import Role, TeamState
from tenants.models import TeamNamespace
from tests.factories import (
    ClusterFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(sandbox):
    return ClusterFactory(server=sandbox.url)


@pytest.fixture
def row(cluster):
    team = TeamFactory(slug="nlp", idp_group="oidc-nlp")
    MembershipFactory(team=team, user=UserFactory(username="dave"), role=Role.ADMIN)
    MembershipFactory(team=team, user=UserFactory(username="zoe"), role=Role.VIEWER)
    return TeamNamespaceFactory(team=team, cluster=cluster)


def client(cluster):
    return kube.client_for_cluster(cluster)


def names(cluster, api_version, kind, namespace="nlp"):
    return sorted(o["metadata"]["name"] for o in client(cluster).list(api_version, kind, namespace=namespace))


def reconcile(row):
    outcome = orchestration.team_namespace_reconcile(team_namespace_id=row.pk)
    row.refresh_from_db()
    return outcome


def test_reconcile_creates_namespace_bindings_and_policies(row, cluster):
    outcome = reconcile(row)
    assert outcome.error is None
    assert row.sync_state == SyncState.APPLIED and row.observed_generation == row.generation
    namespace = client(cluster).get("v1", "Namespace", "nlp")
    assert namespace["metadata"]["labels"]["gpu-portal.io/team"] == "nlp"
    assert names(cluster, "rbac.authorization.k8s.io/v1", "RoleBinding") == ["gpu-portal-edit", "gpu-portal-view"]
    assert len(names(cluster, "networking.k8s.io/v1", "NetworkPolicy")) == 4
    assert {s["state"] for s in row.objects_status} == {"applied"} and len(row.objects_status) == 9


def test_reconciling_twice_writes_nothing_the_second_time(row, sandbox):
    reconcile(row)
    sandbox.reset_stats()
    outcome = reconcile(row)
    assert outcome.writes == 0
    assert sandbox.stats()["writes"] == 0


def test_sweep_repairs_drift_then_is_write_free(row, cluster, sandbox):
    reconcile(row)
    api = client(cluster)
    api.delete("networking.k8s.io/v1", "NetworkPolicy", "default-deny-all", "nlp")
    edited = api.get("rbac.authorization.k8s.io/v1", "RoleBinding", "gpu-portal-edit", "nlp")
    edited["subjects"] = [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}]
    # As kubectl applies it: an apply configuration carries no managedFields (kube-apiserver refuses them).
    edited["metadata"].pop("managedFields", None)
    api.apply({k: edited[k] for k in ("apiVersion", "kind", "metadata", "roleRef", "subjects")},
              field_manager="kubectl")
    totals = orchestration.reconcile_sweep()
    assert totals["repaired"] >= 1 and totals["errors"] == 0
    assert "default-deny-all" in names(cluster, "networking.k8s.io/v1", "NetworkPolicy")
    subjects = api.get("rbac.authorization.k8s.io/v1", "RoleBinding", "gpu-portal-edit", "nlp")["subjects"]
    assert [s["name"] for s in subjects] == ["oidc-nlp", "dave"]
    sandbox.reset_stats()
    assert orchestration.reconcile_sweep()["writes"] == 0
    assert sandbox.stats()["writes"] == 0


def test_removing_the_last_viewer_prunes_the_view_binding(row, cluster, run_on_commit):
    reconcile(row)
    admin = PlatformAdminFactory()
    with run_on_commit():
        services.membership_remove(actor=admin, team=row.team, user=UserFactory(username="zoe"))
    assert names(cluster, "rbac.authorization.k8s.io/v1", "RoleBinding") == ["gpu-portal-edit"]


def test_suspending_withdraws_access_and_archiving_deletes_only_after_confirmation(row, cluster, run_on_commit):
    reconcile(row)
    admin = PlatformAdminFactory()
    with run_on_commit():
        services.team_set_state(actor=admin, team=row.team, state=TeamState.SUSPENDED)
    assert names(cluster, "rbac.authorization.k8s.io/v1", "RoleBinding") == []
    with run_on_commit():
        services.team_set_state(actor=admin, team=row.team, state=TeamState.ARCHIVED)
    assert client(cluster).get("v1", "Namespace", "nlp") is not None
    with pytest.raises(Exception, match="Type the team's slug"):
        services.team_confirm_namespace_deletion(actor=admin, team=row.team, confirmation="nope")
    with run_on_commit():
        services.team_confirm_namespace_deletion(actor=admin, team=row.team, confirmation="nlp")
    assert client(cluster).get("v1", "Namespace", "nlp") is None
    row.refresh_from_db()
    assert row.deleted_at is not None and row.sync_state == SyncState.APPLIED


def test_server_errors_retry_with_backoff_and_converge(row, sandbox, settings):
    sandbox.faults.add(verb="apply", resource="networkpolicies", status=503, reason="ServiceUnavailable",
                       fraction=1.0)
    outcome = reconcile(row)
    assert outcome.error.transient
    assert row.sync_state == SyncState.RETRYING and row.attempts == 1
    # Every policy was tried and answers for itself; what went through before the failure stays applied.
    states = {(s["kind"], s["state"]) for s in row.objects_status}
    assert states == {("Namespace", "applied"), ("ResourceQuota", "applied"), ("LimitRange", "applied"),
                      ("RoleBinding", "applied"), ("NetworkPolicy", "failed")}
    assert sum(s["kind"] == "NetworkPolicy" for s in row.objects_status) == 4
    first_delay = (row.next_attempt_at - timezone.now()).total_seconds()
    assert 0 < first_delay <= settings.RECONCILE_BACKOFF_BASE_SECONDS
    assert "ServiceUnavailable" in row.sync_message
    TeamNamespace.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert orchestration.reconcile_due() == 1
    row.refresh_from_db()
    assert row.attempts == 2 and row.sync_state == SyncState.RETRYING
    assert (row.next_attempt_at - timezone.now()).total_seconds() > first_delay * 0.9 or row.attempts == 2
    sandbox.faults.clear()
    TeamNamespace.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    orchestration.reconcile_due()
    row.refresh_from_db()
    assert row.sync_state == SyncState.APPLIED and row.attempts == 0 and row.next_attempt_at is None


def test_a_slow_api_server_times_out_and_is_retried(row, sandbox, settings):
    settings.KUBE_REQUEST_TIMEOUT = 0.3
    kube.forget_clients()
    sandbox.faults.add(verb="*", resource="*", delay=1.0, count=1)
    outcome = reconcile(row)
    assert outcome.error is not None and outcome.error.transient
    assert row.sync_state == SyncState.RETRYING
    reconcile(row)
    assert row.sync_state == SyncState.APPLIED


def test_a_rejection_is_recorded_and_not_retried_blindly(row, sandbox):
    sandbox.faults.add(verb="apply", resource="rolebindings", status=403, reason="Forbidden",
                       message="rolebindings is forbidden: cannot bind ClusterRole edit", count=None)
    reconcile(row)
    assert row.sync_state == SyncState.REJECTED and row.next_attempt_at is None
    assert "cannot bind ClusterRole edit" in row.sync_message
    failed = [s for s in row.objects_status if s["state"] == "failed"]
    assert [s["kind"] for s in failed] == ["RoleBinding"]
    assert orchestration.reconcile_due() == 0
    sandbox.faults.clear()
    services.reconcile_retry(actor=PlatformAdminFactory(), row=row)
    TeamNamespace.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    orchestration.reconcile_due()
    row.refresh_from_db()
    assert row.sync_state == SyncState.APPLIED


def test_an_unreachable_cluster_is_retried(row):
    row.cluster.server = "http://127.0.0.1:9"
    row.cluster.save()
    outcome = reconcile(row)
    assert outcome.error.status == 0 and row.sync_state == SyncState.RETRYING


def test_cluster_objects_follow_the_priority_tiers(cluster, sandbox, run_on_commit):
    admin = PlatformAdminFactory()
    with run_on_commit():
        services.priority_tier_save(actor=admin, tier=PriorityTierFactory.build(name="urgent", value=100))
    found = client(cluster).get("scheduling.k8s.io/v1", "PriorityClass", "gpu-portal-urgent")
    assert found["value"] == 100
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.APPLIED
    sandbox.reset_stats()
    orchestration.cluster_reconcile(cluster_id=cluster.pk)
    assert sandbox.stats()["writes"] == 0


def test_team_create_reconciles_on_commit_in_every_active_cluster(cluster, run_on_commit):
    other = ClusterFactory(server=cluster.server, active=False)
    with run_on_commit():
        team = services.team_create(actor=PlatformAdminFactory(), slug="vision", name="Vision")
    assert [ns.cluster for ns in team.namespaces.all()] == [cluster]
    assert client(cluster).get("v1", "Namespace", "vision") is not None
    assert other.team_namespaces.count() == 0


@pytest.fixture(params=["list per row", "one list per kind"])
def list_mode(request, monkeypatch):
    monkeypatch.setattr(orchestration, "BULK_LIST_ROWS", 1000 if request.param == "list per row" else 1)
    return request.param


def due_rows(cluster, count):
    rows = [TeamNamespaceFactory(team=TeamFactory(slug=f"t{i}"), cluster=cluster) for i in range(count)]
    TeamNamespace.objects.filter(pk__in=[r.pk for r in rows]).update(next_attempt_at=timezone.now())
    return rows


def test_the_due_sweep_reconciles_a_clusters_rows_together_and_only_once(cluster, sandbox, list_mode):
    rows = due_rows(cluster, 3)
    assert orchestration.reconcile_due() == 3
    for row in rows:
        row.refresh_from_db()
        assert row.sync_state == SyncState.APPLIED and row.next_attempt_at is None
        assert row.observed_generation == row.generation
        assert names(cluster, "networking.k8s.io/v1", "NetworkPolicy", namespace=row.team.namespace)
    assert orchestration.reconcile_due() == 0
    # Due again with nothing to change: no write to the cluster, and the rows' status is written only where a
    # reader would see a change (the observed generation).
    services.team_namespaces_touch(team_namespaces=TeamNamespace.objects.filter(pk__in=[r.pk for r in rows]))
    TeamNamespace.objects.update(next_attempt_at=timezone.now())
    sandbox.reset_stats()
    assert orchestration.reconcile_due() == 3
    assert sandbox.stats()["writes"] == 0
    fresh = list(TeamNamespace.objects.order_by("pk"))
    assert {r.sync_state for r in fresh} == {SyncState.APPLIED}
    assert all(r.observed_generation == r.generation for r in fresh)


def test_a_fault_on_one_rows_apply_leaves_the_other_rows_applied(cluster, sandbox, list_mode):
    rows = due_rows(cluster, 3)
    sandbox.faults.add(verb="apply", resource="networkpolicies", namespace=rows[1].team.namespace, status=503,
                       reason="ServiceUnavailable", fraction=1.0)
    orchestration.reconcile_due()
    states = {}
    for row in rows:
        row.refresh_from_db()
        states[row.team.slug] = row.sync_state
    assert states == {"t0": SyncState.APPLIED, "t1": SyncState.RETRYING, "t2": SyncState.APPLIED}
    failed = TeamNamespace.objects.get(pk=rows[1].pk).objects_status
    assert {s["kind"] for s in failed if s["state"] == "failed"} == {"NetworkPolicy"}
    sandbox.faults.clear()
    TeamNamespace.objects.filter(pk=rows[1].pk).update(next_attempt_at=timezone.now())
    assert orchestration.reconcile_due() == 1
    assert TeamNamespace.objects.get(pk=rows[1].pk).sync_state == SyncState.APPLIED


def test_a_failed_list_is_recorded_on_every_due_row_and_retried(cluster, sandbox, list_mode):
    rows = due_rows(cluster, 2)
    sandbox.faults.add(verb="list", resource="namespaces", status=503, reason="ServiceUnavailable", fraction=1.0)
    orchestration.reconcile_due()
    for row in rows:
        row.refresh_from_db()
        assert row.sync_state == SyncState.RETRYING and "ServiceUnavailable" in row.sync_message
    sandbox.faults.clear()
    TeamNamespace.objects.update(next_attempt_at=timezone.now())
    orchestration.reconcile_due()
    assert {r.sync_state for r in TeamNamespace.objects.all()} == {SyncState.APPLIED}


def test_recording_many_outcomes_writes_only_rows_that_changed(cluster, sandbox, django_assert_max_num_queries):
    from portal.reconcile import record_many

    rows = due_rows(cluster, 3)
    orchestration.reconcile_due()
    rows = list(TeamNamespace.objects.order_by("pk"))
    outcomes = orchestration.team_namespaces_reconcile(cluster=cluster, rows=rows)
    assert [o.writes for o in outcomes] == [0, 0, 0]
    with django_assert_max_num_queries(1):  # the one read of current generations, no write
        assert record_many(TeamNamespace, [(r, r.generation, o) for r, o in zip(rows, outcomes, strict=True)]) == 0
