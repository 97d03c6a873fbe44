"""The cluster deployment in deploy/kustomize: it renders, every object passes the Kubernetes schemas (strict), the
pods are locked down, the probes answer under the deployment's own settings, and the ClusterRole is exactly what
the code needs: derived from the gateway's kinds table and the builders, and checked against every request a
full run makes to a sandbox cluster."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from backends import backends
from composition import reconcile
from jobs import selectors as job_selectors
from jobs import services as job_services
from jobs import sync as job_sync
from jobs import watch_cache as job_watch_cache
from portal import kube, upstream
from portal.desired import team_namespace_desired
from tenants import manifests as tenant_manifests
from tenants import selectors as tenant_selectors
from tenants import services as tenant_services
from tenants.choices import Scheduler, TeamState
from tenants.models import TeamNamespace
from tests.factories import PlatformAdminFactory
from tests.requires import unavailable
from workspaces import selectors as workspace_selectors

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kustomize"
KUBERNETES_VERSION = f"{upstream.KUBERNETES.removeprefix('v')}.0"  # the release the portal targets
APPLY_VERBS = {"list", "create", "patch", "delete"}  # server-side apply is a PATCH that creates when missing


def _files() -> list[dict]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    assert set(kustomization) == {"apiVersion", "kind", "resources"}, "keep the base plain: resources only"
    return [doc for name in kustomization["resources"] for doc in yaml.safe_load_all((BASE / name).read_text())
            if doc]


@pytest.fixture(scope="module")
def objects() -> list[dict]:
    return _files()


def by_kind(objects, kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def test_kubectl_kustomize_renders_exactly_the_listed_files(objects):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        unavailable("kubectl is not installed: `kubectl kustomize` was not run")
    result = subprocess.run([kubectl, "kustomize", str(BASE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(rendered, key=key) == sorted(objects, key=key)


def test_every_object_passes_the_kubernetes_schemas_strictly(objects):
    assert {o["kind"] for o in objects} == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                           "ConfigMap", "Deployment", "Service"}
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_a_wrong_field_is_caught_by_the_validation():
    deployment = by_kind(_files(), "Deployment")[0]
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_web_worker_and_beat_are_locked_down(objects):
    deployments = {d["metadata"]["name"]: d for d in by_kind(objects, "Deployment")}
    assert set(deployments) == {"gpu-portal-web", "gpu-portal-worker", "gpu-portal-beat", "gpu-portal-watcher"}
    assert deployments["gpu-portal-beat"]["spec"]["replicas"] == 1  # one scheduler, or every task runs twice
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "gpu-portal"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for container in pod["containers"] + pod.get("initContainers", []):
            context = container["securityContext"]
            assert context["capabilities"]["drop"] == ["ALL"] and "add" not in context["capabilities"]
            assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
            assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
            secrets = {e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"] if "valueFrom" in e}
            assert secrets == {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "OIDC_RP_CLIENT_SECRET"}, name
            assert all("value" not in e for e in container["env"]), "secrets come from the Secret only"
            assert container["envFrom"] == [{"configMapRef": {"name": "gpu-portal"}}]
    assert deployments["gpu-portal-beat"]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    watcher = deployments["gpu-portal-watcher"]["spec"]["template"]["spec"]["containers"][0]
    assert watcher["command"][:3] == ["python", "manage.py", "watch_clusters"] and watcher["livenessProbe"]
    web = deployments["gpu-portal-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "gunicorn" in web["command"]
    config = by_kind(objects, "ConfigMap")[0]["data"]
    assert config["PORTAL_MODE"] == "production"
    assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "OIDC_RP_CLIENT_SECRET"} & set(config)


def test_the_probes_answer_under_the_deployments_own_settings(objects, tmp_path):
    """Production settings from the ConfigMap (HTTPS redirect, allowed hosts): the kubelet's plain-HTTP probes
    with the manifest's Host header get a 200, not a redirect or a 400."""
    web = next(d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == "gpu-portal-web")
    container = web["spec"]["template"]["spec"]["containers"][0]
    probes = [(p["httpGet"]["path"], {h["name"]: h["value"] for h in p["httpGet"]["httpHeaders"]})
              for p in (container["livenessProbe"], container["readinessProbe"])]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update(by_kind(objects, "ConfigMap")[0]["data"])
    env.update({"SECRET_KEY": "k" * 64, "DATABASE_URL": f"sqlite:///{tmp_path / 'portal.sqlite3'}"})
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, migrate.stderr
    script = ("import django, json, sys; django.setup(); from django.test import Client; "
              "probes = json.loads(sys.argv[1]); c = Client(); "
              "print(json.dumps([c.get(path, headers=headers).status_code for path, headers in probes]))")
    import json

    result = subprocess.run([sys.executable, "-c", script, json.dumps(probes)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [200, 200]


# --- the ClusterRole ---------------------------------------------------------------------------------------------


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _permissions(rules: list[dict]) -> set[tuple[str, str, str, str]]:
    """(group, resource, verb, resourceName or '') for every combination a rule list grants."""
    granted = set()
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        granted.add((group, resource, verb, name))
    return granted


def needed_permissions() -> set[tuple[str, str, str, str]]:
    """What the code does, from its own tables: the kinds reconcile applies, lists and prunes; the kinds the object
    pages read live; everything else the gateway knows is read-only (but for what it reads only from sandbox
    clusters, where no RBAC applies); pod logs; `watch` on what the cluster watcher watches; and `bind` on the
    ClusterRoles the team RoleBindings reference."""
    applied, viewed = set(), set()
    for scheduler in Scheduler.values:
        cluster = type("C", (), {"scheduler": scheduler})()
        viewed |= set(reconcile.team_kinds(cluster)) | set(reconcile.cluster_kinds(cluster))
        applied |= viewed | set(job_selectors.job_kinds(scheduler))
    applied |= set(workspace_selectors.WORKSPACE_KINDS)
    needed = set()
    for key, kind in kube.KINDS.items():
        if kind.sandbox_only:
            continue
        group, resource = _group(key[0]), kind.plural
        verbs = APPLY_VERBS if key in applied else {"list"}
        verbs = verbs | ({"get"} if key in viewed else set())
        needed |= {(group, resource, verb, "") for verb in verbs}
    needed.add(("", "pods/log", "get", ""))
    for backend in backends():  # status the portal writes as a controller (billing.enforce)
        for api_version, kind in backend.budget_status_kinds:
            needed.add((_group(api_version), f"{kube.KINDS[(api_version, kind)].plural}/status", "patch", ""))
    for scheduler in Scheduler.values:  # the cluster watcher's informers
        for (api_version, kind), _, _ in job_watch_cache.watched_kinds(scheduler):
            needed.add((_group(api_version), kube.KINDS[(api_version, kind)].plural, "watch", ""))
    team = tenant_manifests.TeamSpec(slug="t", namespace="t", idp_group="g", editors=("a",), viewers=("b",))
    for binding in tenant_manifests.role_binding_manifests(team):
        needed.add(("rbac.authorization.k8s.io", "clusterroles", "bind", binding["roleRef"]["name"]))
    return needed


def test_the_cluster_role_grants_exactly_what_the_code_needs(objects):
    (role,) = by_kind(objects, "ClusterRole")
    granted = _permissions(role["rules"])
    assert not {p for p in granted if "*" in p}, "no wildcards"
    assert not {p for p in granted if p[1] in {"secrets", "configmaps", "clusterroles"} and p[2] != "bind"}
    assert granted - needed_permissions() == set(), "granted but never used"
    assert needed_permissions() - granted == set(), "used but not granted"
    (binding,) = by_kind(objects, "ClusterRoleBinding")
    (account,) = by_kind(objects, "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


# Every request the sandbox serves is counted per (verb, group, resource) by a zero-effect fault (a 1 µs delay).
SANDBOX_VERB_TO_RBAC = {"get": {"get"}, "list": {"list"}, "watch": {"watch"}, "create": {"create"},
                        "update": {"update"}, "patch": {"patch"}, "apply": {"patch", "create"},
                        "delete": {"delete"}, "deletecollection": {"deletecollection"}}


def _record_requests(sb) -> None:
    resources = [("", "pods/log")] + [(_group(key[0]), kind.plural) for key, kind in kube.KINDS.items()]
    for verb in SANDBOX_VERB_TO_RBAC:
        for group, resource in resources:  # the subresource first: "pods" would match pods/log too
            sb.faults.add(verb=verb, resource=resource, group=group, status=None, delay=1e-6, fraction=1.0)


def _recorded(sb) -> set[tuple[str, str, str]]:
    return {(f["verb"], f["group"], f["resource"]) for f in sb.faults.list() if f["hits"]}


@pytest.mark.django_db
@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_a_full_run_against_a_cluster_needs_nothing_the_role_does_not_grant(objects, backend, run_on_commit):
    """Reconcile, jobs of every kind run to the end, pod logs, live object pages, cancel, the drift sweep and a
    team's namespaces deleted: every request the sandbox saw is allowed by the ClusterRole (apply as patch and
    create), and the run exercised the applied kinds' write verbs."""
    from sandbox import Sandbox
    from tests.jobs.conftest import build_world, step

    with Sandbox(builtin_custom_kinds=True, simulate=True, tick=None,
                 simulation={"duration": 100, "startup": 5}) as sb:
        _record_requests(sb)
        world = build_world(sb.url, backend)
        jobs = []
        for kind in ("pytorch", "ray", "batch"):
            with run_on_commit():
                jobs.append(job_services.job_submit(
                    actor=world["member"], team=world["team"], flavor=world["flavor"], kind=kind, name=f"{kind}-1",
                    image="ghcr.io/acme/train:1", command=["python", "train.py"], workers=2, gpus_per_worker=1,
                    cpu_per_worker=2, memory_gib_per_worker=8))
        for clock in (0, 5):
            step(sb, clock)
            job_sync.job_status_sync(cluster=world["cluster"])
        job_selectors.job_pods(job=jobs[0])
        for obj in team_namespace_desired(
                team_namespace=TeamNamespace.objects.get(team=world["team"])):
            tenant_selectors.live_object(cluster=world["cluster"], api_version=obj["apiVersion"], kind=obj["kind"],
                                         name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        with run_on_commit():
            job_services.job_cancel(actor=world["member"], job=jobs[1])
        reconcile.reconcile_sweep()
        client = kube.client_for_cluster(world["cluster"])
        for kind, labels, fields in job_watch_cache.watched_kinds(backend):  # what the watcher's informers ask
            client.list_versioned(*kind, label_selector=labels, field_selector=fields)
            list(client.watch(*kind, resource_version="0", label_selector=labels, field_selector=fields,
                              timeout_seconds=0))
        admin = PlatformAdminFactory()
        with run_on_commit():
            tenant_services.team_set_state(actor=admin, team=world["team"], state=TeamState.ARCHIVED)
        with run_on_commit():
            tenant_services.team_confirm_namespace_deletion(actor=admin, team=world["team"], confirmation="nlp")
        recorded = _recorded(sb)
    kube.forget_clients()

    (role,) = by_kind(objects, "ClusterRole")
    granted = {(group, resource, verb) for group, resource, verb, _ in _permissions(role["rules"])}
    needed = {(group, resource, rbac) for verb, group, resource in recorded for rbac in SANDBOX_VERB_TO_RBAC[verb]}
    assert needed - granted == set()
    seen_verbs = {verb for verb, _, _ in recorded}
    assert {"apply", "list", "get", "delete"} <= seen_verbs, seen_verbs
    assert ("get", "", "pods/log") in recorded and ("delete", "", "namespaces") in recorded
