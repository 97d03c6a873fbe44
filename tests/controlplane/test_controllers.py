"""What the real controllers do with the portal's objects: a team namespace deleted by the portal passes through
`Terminating` while the namespace controller empties it, and a ResourceQuota's `status.used`, which the portal
shows as the team's usage, is the quota controller's count."""

import time

import pytest

from composition import reconcile
from tenants import services as tenant_services
from tenants.choices import Scheduler, TeamState
from tenants.models import TeamNamespace
from tests.controlplane.test_least_privilege import _world
from tests.factories import PlatformAdminFactory
from tools import controlplane

pytestmark = [pytest.mark.controlplane, pytest.mark.django_db]
HOLD = "gpu-portal.io/test-hold"


def _until(check, timeout: float = 60, what: str = ""):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.2)


def test_a_deleted_team_namespace_is_terminating_until_the_namespace_controller_empties_it(
        control_plane, real_cluster, run_on_commit):
    cluster = real_cluster(scheduler=Scheduler.KUEUE, cohort="gpu")
    world = _world(cluster, "term")
    namespace = world["team"].namespace
    # Something the namespace controller must wait for: an object with a finalizer nobody removes but the test.
    status, body = control_plane.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": [HOLD]}})
    assert status == 201, body
    admin = PlatformAdminFactory()
    with run_on_commit():
        tenant_services.team_set_state(actor=admin, team=world["team"], state=TeamState.ARCHIVED)
    with run_on_commit():
        tenant_services.team_confirm_namespace_deletion(actor=admin, team=world["team"], confirmation="term")
    assert TeamNamespace.objects.get(team=world["team"]).deleted_at is not None

    def terminating():
        _, ns = control_plane.request("GET", f"/api/v1/namespaces/{namespace}")
        conditions = {c["type"]: c for c in ns.get("status", {}).get("conditions", [])}
        remaining = conditions.get("NamespaceFinalizersRemaining", {})
        return ns if remaining.get("status") == "True" and HOLD in remaining.get("message", "") else None

    ns = _until(terminating, what="the namespace controller reports the held finalizer")
    assert ns["status"]["phase"] == "Terminating" and ns["metadata"]["deletionTimestamp"]
    reconcile.reconcile_sweep()  # the cluster's objects follow the archived team (its ClusterQueue goes)
    offset = control_plane.audit_offset()
    second = reconcile.reconcile_sweep()
    writes = [(e["verb"], e["requestURI"], e["responseStatus"]["code"]) for e in control_plane.audit_events(offset)
              if e["verb"] in ("create", "update", "patch", "delete") and e["user"]["username"] ==
              controlplane.ADMIN_USER]
    assert second["writes"] == 0, writes  # a namespace on its way out is not deleted again

    status, _ = control_plane.request("PATCH", f"/api/v1/namespaces/{namespace}/configmaps/held",
                                      {"metadata": {"finalizers": None}},
                                      content_type="application/merge-patch+json")
    assert status == 200
    _until(lambda: control_plane.request("GET", f"/api/v1/namespaces/{namespace}")[0] == 404,
           what="the namespace is gone once emptied")


def test_resource_quota_used_is_the_quota_controllers_count(control_plane, real_cluster):
    cluster = real_cluster(scheduler=Scheduler.KUEUE, cohort="gpu")
    world = _world(cluster, "quota")
    row = TeamNamespace.objects.get(team=world["team"])
    namespace = world["team"].namespace
    resource = world["flavor"].resource_name
    quota_name = next(s["name"] for s in row.objects_status if s["kind"] == "ResourceQuota")
    quota_path = f"/api/v1/namespaces/{namespace}/resourcequotas/{quota_name}"

    def used():
        _, quota = control_plane.request("GET", quota_path)
        return (quota.get("status") or {}).get("used")

    _until(lambda: used() is not None, what="the quota controller's first count")
    resources = {"cpu": "1", "memory": "1Gi", resource: "2"}
    status, body = control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"},
        "spec": {"containers": [{"name": "main", "image": "ghcr.io/acme/train:1",
                                 "resources": {"requests": resources, "limits": resources}}]}})
    assert status == 201, body
    _until(lambda: used().get(f"requests.{resource}") == "2", what="the pod's GPUs counted")
    reconcile.team_namespace_reconcile(team_namespace_id=row.pk)
    row.refresh_from_db()
    assert row.usage == {resource: 2}
    # Admission counts a new pod; only the quota controller gives the units back when it goes.
    status, _ = control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/trainer",
                                      {"gracePeriodSeconds": 0})
    assert status == 200
    _until(lambda: used().get(f"requests.{resource}") == "0", what="the quota controller's recount")
    reconcile.team_namespace_reconcile(team_namespace_id=row.pk)
    row.refresh_from_db()
    assert row.usage == {resource: 0}
