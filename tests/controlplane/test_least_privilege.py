"""Least privilege with the real authorizer: the portal runs as the ServiceAccount of deploy/kustomize, bound to its
ClusterRole, with a token from the TokenRequest API. On both schedulers it goes through everything it does in a
cluster: reconcile of a team (quota on a whole-GPU and a DRA flavor, its department, the cluster's topology
levels), jobs of every kind submitted, synced and cancelled (their pods and logs, the live object pages of team and
cluster objects), a workspace started, suspended and deleted (its volume claim, Service and Ingress), the budget
held in the scheduler, Volcano's network topology read, the drift sweep pruning what no row wants (a flavor, a tier,
the topology, the department and the team's quota taken away, objects left with the portal's labels), the watcher's
lists and watches, and a team's namespaces deleted. It must meet no 403, and must use every permission the role
grants: a grant the run does not use is a grant too many, or a feature this run does not exercise yet.

No Kueue or Volcano controller runs here, so jobs are created, read, synced and cancelled but never admitted or
run; what those controllers write that the portal reads or answers (a Kueue Workload asking for the budget check, a
Volcano HyperNode) the test writes as the admin, as the controllers would. Pods are made by the test (no kubelet
either), so the logs request is authorized and then answered 400 by the server.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from backends import backend_for
from billing import budgets
from billing import enforce as budget_enforce
from billing.models import BudgetHold, UsageHour
from billing.pricing import floor_hour
from composition import reconcile
from jobs import selectors as job_selectors
from jobs import services as job_services
from jobs import sync as job_sync
from jobs import watch_cache as job_watch_cache
from jobs.models import Job
from portal import kube
from portal.desired import cluster_desired, shared_inputs, team_namespace_desired
from portal.naming import MANAGED_BY, MANAGED_BY_LABEL, cluster_labels, team_labels
from portal.upstream import KUEUE_API, VOLCANO_TOPOLOGY_API
from quotas import services as quota_services
from tenants import clusters as cluster_services
from tenants import selectors as tenant_selectors
from tenants import services as tenant_services
from tenants.choices import Role, Scheduler, Sharing, TeamState
from tenants.models import PriorityTier, TeamNamespace
from tests.factories import (
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
)
from tests.portal.test_deployment import _files, _permissions
from workspaces import selectors as workspace_selectors
from workspaces import services as workspace_services

pytestmark = [pytest.mark.controlplane, pytest.mark.django_db]
CONTEXT = "gpu-portal"
MANAGED = f"{MANAGED_BY_LABEL}%3D{MANAGED_BY}"
LEVELS = [{"name": "rack", "node_label": "example.com/rack"}, {"name": "host", "node_label": "kubernetes.io/hostname"}]


def _path(obj: dict, plural: str) -> str:
    version = obj["apiVersion"]
    base = "/api/v1" if version == "v1" else f"/apis/{version}"
    namespace = obj["metadata"].get("namespace")
    return f"{base}{f'/namespaces/{namespace}' if namespace else ''}/{plural}/{obj['metadata']['name']}"


def portal_account(plane) -> str:
    """Apply deploy/kustomize's Namespace, ServiceAccount, ClusterRole and binding as the admin; return the
    account's user name after adding its TokenRequest token to the kubeconfig as context `gpu-portal`."""
    objects = {o["kind"]: o for o in _files()}
    for kind in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
        plane.apply(objects[kind], _path(objects[kind], kind.lower() + "s"))
    account = objects["ServiceAccount"]["metadata"]
    status, body = plane.request(
        "POST", f"/api/v1/namespaces/{account['namespace']}/serviceaccounts/{account['name']}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    assert status == 201, body
    plane.add_context(CONTEXT, body["status"]["token"])
    return f"system:serviceaccount:{account['namespace']}:{account['name']}"


def _admin_create(plane, obj: dict) -> dict:
    """An object written as the admin: what a controller, a kubelet or a person with kubectl would have made."""
    meta = obj["metadata"]
    status, body = plane.request("POST", kube.path_for(obj["apiVersion"], obj["kind"], meta.get("namespace")), obj)
    assert status == 201, body
    return body


def _admin_status(plane, obj: dict, status: dict) -> None:
    meta = obj["metadata"]
    path = kube.path_for(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]) + "/status"
    code, body = plane.request("PATCH", path, {"status": status}, content_type="application/merge-patch+json")
    assert code == 200, body


def _gone(plane, obj: dict) -> bool:
    meta = obj["metadata"]
    status, body = plane.request("GET", kube.path_for(obj["apiVersion"], obj["kind"], meta.get("namespace"),
                                                      meta["name"]))
    return status == 404 or bool(body.get("metadata", {}).get("deletionTimestamp"))


def _world(cluster, slug: str) -> dict:
    """A team with quota on a whole-GPU flavor, two priority tiers (the lane's other tests share it)."""
    flavor = GpuFlavorFactory(cluster=cluster, name="h100", gpus_per_node=8, capacity=64)
    for name, value, policy, default in (("urgent", 100000, "PreemptLowerPriority", False),
                                         ("standard", 10000, "PreemptLowerPriority", True)):
        PriorityTierFactory(name=name, value=value, preemption_policy=policy, is_default=default)
    team = TeamFactory(slug=slug, idp_group=f"{slug}-group")
    TeamNamespaceFactory(team=team, cluster=cluster)
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    quota_services.quota_set(actor=PlatformAdminFactory(), team=team, flavor=flavor, guaranteed=8, burst=8,
                             cpu_cores=64, memory_gib=512)
    reconcile.cluster_reconcile(cluster_id=cluster.pk)
    reconcile.team_namespace_reconcile(team_namespace_id=TeamNamespace.objects.get(team=team).pk)
    return {"flavor": flavor, "team": team, "member": member}


def _whole_world(cluster, slug: str) -> dict:
    """`_world`, and quota on a DRA flavor too, the team under a department, the cluster's topology levels; a
    flavor and a tier nobody uses yet (to be taken away later)."""
    world = _world(cluster, slug)
    admin, team = PlatformAdminFactory(), world["team"]
    dra = GpuFlavorFactory(cluster=cluster, name="h100-dra", sharing=Sharing.DRA, device_class="gpu.nvidia.com",
                           resource_name="gpu.nvidia.com/devices", node_labels={}, gpus_per_node=8, capacity=16)
    spare = GpuFlavorFactory(cluster=cluster, name="l4", gpus_per_node=8, capacity=8)
    PriorityTierFactory(name="scavenger", value=100, preemption_policy="Never", is_default=False)
    department = TeamFactory(slug=f"{slug}-dept", idp_group=f"{slug}-dept-group")
    tenant_services.team_update(actor=admin, team=team, name=team.name, cost_center=team.cost_center,
                                idp_group=team.idp_group, parent=department)
    quota_services.quota_set(actor=admin, team=team, flavor=dra, guaranteed=8, burst=8, cpu_cores=64,
                             memory_gib=512)
    cluster_services.cluster_update(actor=admin, cluster=cluster, topology_levels=LEVELS)
    reconcile.cluster_reconcile(cluster_id=cluster.pk)
    reconcile.team_namespace_reconcile(team_namespace_id=TeamNamespace.objects.get(team=team).pk)
    return {**world, "admin": admin, "dra": dra, "spare": spare, "department": department}


def _fresh(plane) -> None:
    """The lane's earlier tests applied cluster-wide objects of the same names (flavors, tiers, the budget check):
    removed as the admin, so that the account meets a cluster it has not written to and creates what it applies."""
    for (api_version, kind), spec in kube.KINDS.items():
        if not spec.namespaced and kind != "Namespace":
            status, body = plane.request("DELETE", kube.path_for(api_version, kind) + f"?labelSelector={MANAGED}")
            assert status in (200, 404), body


def _pod_for(plane, job: Job) -> None:
    """A pod of the job, as its controller would make it (none runs here)."""
    name = f"{job.object_name}-0"
    status, body = plane.request("POST", f"/api/v1/namespaces/{job.team.namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"gpu-portal.io/job": str(job.pk), "gpu-portal.io/team": job.team.slug}},
        "spec": {"containers": [{"name": "main", "image": job.image,
                                 "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}})
    assert status == 201, body


def _jobs(plane, cluster, world, run_on_commit) -> None:
    """Every kind submitted (and one on the DRA flavor), synced, its pods and logs read, then all cancelled."""
    jobs = []
    for kind, flavor in (("pytorch", "flavor"), ("ray", "flavor"), ("batch", "flavor"), ("batch", "dra")):
        with run_on_commit():
            jobs.append(job_services.job_submit(
                actor=world["member"], team=world["team"], flavor=world[flavor], kind=kind,
                name=f"{kind}-{len(jobs)}", image="ghcr.io/acme/train:1", command=["python", "train.py"], workers=2,
                gpus_per_worker=1, cpu_per_worker=2, memory_gib_per_worker=8))
    for job in jobs:
        job.refresh_from_db()
        assert job.sync_state == "applied", (job.kind, job.sync_state, job.sync_message)
    job_sync.job_status_sync(cluster=cluster)
    if not job_selectors.job_pods(job=jobs[0]):  # the batch Job controller makes a Kueue job's pods, else the test
        _pod_for(plane, jobs[0])
    pods = job_selectors.job_pods(job=jobs[0])
    assert pods and all("log unavailable" in p["log"] for p in pods), pods  # no kubelet serves logs here
    for job in jobs:
        with run_on_commit():
            job_services.job_cancel(actor=world["member"], job=job)
    job_sync.job_status_sync(cluster=cluster)


def _object_pages(cluster, team) -> None:
    """The live view of every object of the team's page and of the cluster's console page."""
    cluster.refresh_from_db()
    objects = team_namespace_desired(team_namespace=TeamNamespace.objects.get(team=team))
    objects += cluster_desired(cluster=cluster, **shared_inputs(cluster=cluster))
    for obj in objects:
        tenant_selectors.live_object(cluster=cluster, api_version=obj["apiVersion"], kind=obj["kind"],
                                     name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))


def _workspace(cluster, world, run_on_commit, settings) -> None:
    """Started (volume claim, Service, Ingress under the platform's host pattern), suspended (the Service goes),
    deleted (the claim and the Ingress go)."""
    settings.WORKSPACE_HOST_PATTERN = "{workspace}.{team}.workspaces.example.com"
    settings.WORKSPACE_ANY_IMAGE = True
    with run_on_commit():
        workspace, _ = workspace_services.workspace_create(
            actor=world["member"], team=world["team"], flavor=world["flavor"], name="nb", tool="jupyterlab",
            image="quay.io/jupyter/pytorch-notebook:cuda12-python-3.12", gpus=1, volume_gib=10)
    client = kube.client_for_cluster(cluster)
    selector = f"gpu-portal.io/workspace={workspace.pk}"
    held = {kind for api_version, kind in workspace_selectors.WORKSPACE_KINDS
            if client.list(api_version, kind, namespace=world["team"].namespace, label_selector=selector)}
    assert held == {"PersistentVolumeClaim", "Service", "Ingress"}, held
    with run_on_commit():
        workspace_services.workspace_suspend(workspace=workspace, actor=world["member"])
    assert not client.list("v1", "Service", namespace=world["team"].namespace, label_selector=selector)
    with run_on_commit():
        workspace_services.workspace_delete(workspace=workspace, actor=world["member"])
    for api_version, kind in (("v1", "PersistentVolumeClaim"), ("networking.k8s.io/v1", "Ingress")):
        assert all(o["metadata"].get("deletionTimestamp") for o in client.list(
            api_version, kind, namespace=world["team"].namespace, label_selector=selector)), kind


def _budget_hold(plane, cluster, world, run_on_commit) -> None:
    """The team over its GPU-hour allowance: held in the scheduler. Kueue: the portal keeps its AdmissionCheck
    Active and sets the check on the team's Workload (written here as Kueue would, asking for the check with quota
    reserved); Volcano: the team's Queue is closed."""
    now = timezone.now()
    team, flavor = world["team"], world["flavor"]
    UsageHour.objects.create(team=team, flavor=flavor, cluster=cluster, namespace=team.namespace,
                             hour=floor_hour(now) - timedelta(hours=1), allocated_gpu_hours=Decimal(10),
                             used_gpu_hours=Decimal(10))
    with run_on_commit():
        budgets.allowance_set(actor=world["admin"], team=team, flavor=flavor, gpu_hours=8, window_days=1)
    backend = backend_for(cluster)
    if backend.budget_check:
        workload = _admin_create(plane, {
            "apiVersion": KUEUE_API, "kind": "Workload",
            "metadata": {"name": "job-by-hand", "namespace": team.namespace},
            "spec": {"queueName": "team", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "ghcr.io/acme/train:1"}]}}}]}})
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        _admin_status(plane, workload, {
            "admission": {"clusterQueue": team.slug, "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": flavor.name}}]},
            "admissionChecks": [{"name": backend.budget_check, "state": "Pending", "message": "",
                                 "lastTransitionTime": stamp}]})
    assert budget_enforce.budget_enforce(now=now)["errors"] == 0
    assert BudgetHold.objects.filter(team=team, ended_at__isnull=True).exists()
    if backend.budget_check:
        _, found = plane.request("GET", _path(workload, "workloads"))
        (check,) = found["status"]["admissionChecks"]
        assert check["state"] == "Pending" and check["message"].startswith(budget_enforce.HELD_MARK), check
    else:
        _, found = plane.request("GET", f"/apis/scheduling.volcano.sh/v1beta1/queues/{team.slug}")
        assert found["status"]["state"] == "Closed", found.get("status")


def _volcano_topology(plane, cluster) -> None:
    """The cluster page's discovered HyperNodes, and the status sync's read of where a gang runs: a HyperNode
    choosing its nodes by label makes the portal read the Nodes' labels."""
    _admin_create(plane, {"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": "gpu-node-0", "labels": {"example.com/rack": "r1"}}})
    _admin_create(plane, {"apiVersion": VOLCANO_TOPOLOGY_API, "kind": "HyperNode", "metadata": {"name": "rack-r1"},
                          "spec": {"tier": 1, "members": [{"type": "Node", "selector": {
                              "labelMatch": {"matchLabels": {"example.com/rack": "r1"}}}}]}})
    tenant_selectors.discovered_hypernodes(cluster=cluster)
    _, nodes = job_selectors.volcano_topology(cluster=cluster, nodes={"gpu-node-0"})
    assert nodes == {"gpu-node-0": {"example.com/rack": "r1"}}


def _strays(plane, cluster, team) -> list[dict]:
    """Objects with the portal's labels that no row wants (left by an earlier layout of the portal's objects, or
    copied by hand): the sweep prunes them."""
    labels, namespace = team_labels(team.slug), team.namespace
    strays = [
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "old-quota", "namespace": namespace,
                                                                   "labels": labels}, "spec": {"hard": {"pods": "1"}}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "old-limits", "namespace": namespace,
                                                                "labels": labels},
         "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "old-policy", "namespace": namespace, "labels": labels}, "spec": {"podSelector": {}}},
    ]
    if backend_for(cluster).budget_check:
        strays.append({"apiVersion": KUEUE_API, "kind": "AdmissionCheck",
                       "metadata": {"name": "gpu-portal-old-check", "labels": cluster_labels()},
                       "spec": {"controllerName": "gpu-portal.io/old"}})
    for obj in strays:
        _admin_create(plane, obj)
    return strays


def _taken_away(plane, cluster, world, run_on_commit) -> None:
    """What the platform and the team's admins take away, pruned by the reconcile and the sweep: the unused flavor
    and tier, the topology levels, the department, the team's quota; and the strays."""
    admin = world["admin"]
    strays = _strays(plane, cluster, world["team"])
    with run_on_commit():
        cluster_services.admin_object_delete(actor=admin, obj=world["spare"])
        cluster_services.admin_object_delete(actor=admin, obj=PriorityTier.objects.get(name="scavenger"))
        cluster_services.cluster_update(actor=admin, cluster=cluster, topology_levels=[])
        team = world["team"]
        tenant_services.team_update(actor=admin, team=team, name=team.name, cost_center=team.cost_center,
                                    idp_group=team.idp_group, parent=None)
        for flavor in (world["flavor"], world["dra"]):
            quota_services.quota_set(actor=admin, team=team, flavor=flavor, guaranteed=0, burst=0)
    assert reconcile.reconcile_sweep()["errors"] == 0
    assert [o["metadata"]["name"] for o in strays if not _gone(plane, o)] == []


def life_cycle(plane, cluster, slug: str, run_on_commit, settings) -> None:
    world = _whole_world(cluster, slug)
    _jobs(plane, cluster, world, run_on_commit)
    _object_pages(cluster, world["team"])
    _workspace(cluster, world, run_on_commit, settings)
    _budget_hold(plane, cluster, world, run_on_commit)
    if backend_for(cluster).discovers_hypernodes:
        _volcano_topology(plane, cluster)
    assert reconcile.reconcile_sweep()["errors"] == 0
    client = kube.client_for_cluster(cluster)
    for kind, labels, fields in job_watch_cache.watched_kinds(cluster.scheduler):  # the watcher's informers
        client.list_versioned(*kind, label_selector=labels, field_selector=fields)
        list(client.watch(*kind, resource_version="0", label_selector=labels, field_selector=fields,
                          timeout_seconds=1))
    _taken_away(plane, cluster, world, run_on_commit)
    admin = world["admin"]
    with run_on_commit():
        tenant_services.team_set_state(actor=admin, team=world["team"], state=TeamState.ARCHIVED)
    with run_on_commit():
        tenant_services.team_confirm_namespace_deletion(actor=admin, team=world["team"], confirmation=slug)
    assert TeamNamespace.objects.get(team=world["team"]).deleted_at is not None


AUDIT_TO_RBAC = {"get": {"get"}, "list": {"list"}, "watch": {"watch"}, "create": {"create"},
                 "update": {"update"}, "patch": {"patch"}, "delete": {"delete"}}


def test_the_portal_account_needs_and_uses_exactly_its_cluster_role(control_plane, real_cluster, run_on_commit,
                                                                    settings):
    user = portal_account(control_plane)
    _fresh(control_plane)
    offset = control_plane.audit_offset()
    for scheduler, slug in ((Scheduler.KUEUE, "nlp"), (Scheduler.VOLCANO, "cv")):
        cluster = real_cluster(context=CONTEXT, scheduler=scheduler,
                               cohort="gpu" if scheduler == Scheduler.KUEUE else "")
        life_cycle(control_plane, cluster, slug, run_on_commit, settings)
        type(cluster).objects.filter(pk=cluster.pk).update(active=False)  # one cluster per API server at a time
    events = control_plane.audit_events(offset, user=user)
    forbidden = sorted({(e["verb"], e["requestURI"]) for e in events if e["responseStatus"]["code"] == 403})
    assert forbidden == [], "the role refuses what the portal does"

    used = set()
    for e in events:
        ref = e.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        verbs = AUDIT_TO_RBAC[e["verb"]]
        if e["verb"] == "patch" and e["responseStatus"]["code"] == 201:  # an apply that created the object
            verbs = verbs | {"create"}
        used |= {(ref.get("apiGroup", ""), resource, verb) for verb in verbs}
    (role,) = [o for o in _files() if o["kind"] == "ClusterRole"]
    granted = _permissions(role["rules"])
    # `bind` is checked by the RBAC escalation check on every RoleBinding written, not a request of its own: a
    # RoleBinding to `edit` or `view` applied without a 403 is where it was used.
    bound = {(g, r, v) for g, r, v, _ in granted if v == "bind"}
    assert ("rbac.authorization.k8s.io", "rolebindings", "patch") in used
    unused = {(g, r, v) for g, r, v, _ in granted} - used - bound
    assert sorted(unused) == [], "granted but never used in this run"
