"""Pure builders for what a workspace holds in its team's namespace besides its run: the home volume claim, the
Service in front of its pod and, where the platform gives workspaces a host name, an Ingress; and what its run (a
job of kind `workspace`) adds to a job's pod: the volume, the port, the server's command and its hashed access
token. Values in, plain dicts out: no database, settings or clock."""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass

from portal.naming import dns1035_name, team_labels

WORKSPACE_LABEL = "gpu-portal.io/workspace"
RUN_LABEL = "gpu-portal.io/job"  # the label every pod of a job carries (jobs.manifests.JOB_LABEL)
HOME_VOLUME = "home"


@dataclass(frozen=True)
class ToolSpec:
    port: int
    home: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    password_env: str


# JupyterLab (jupyter_server's PasswordIdentityProvider, with the token switched off) and code-server (its
# --auth=password with HASHED_PASSWORD) both accept a hash of the password, so the pod never holds the token.
TOOLS = {
    "jupyterlab": ToolSpec(8888, "/home/jovyan", ("jupyter", "lab"), (
        "--ip=0.0.0.0", "--port=8888", "--no-browser", "--ServerApp.root_dir=/home/jovyan",
        "--IdentityProvider.token=", "--PasswordIdentityProvider.hashed_password=$(WORKSPACE_PASSWORD_HASH)"),
        "WORKSPACE_PASSWORD_HASH"),
    "code-server": ToolSpec(8080, "/home/coder", ("code-server",), (
        "--bind-addr=0.0.0.0:8080", "--auth=password", "/home/coder"), "HASHED_PASSWORD"),
}


def workspace_object_name(name: str, workspace_id: int) -> str:
    """The name of a workspace's Service, Ingress and (with `-home`) volume claim: never a job's."""
    return dns1035_name("ws", name, str(workspace_id), limit=50)


def volume_name(object_name: str) -> str:
    return f"{object_name}-home"


def access_hash(tool: str, token: str, salt: str) -> str:
    """The form of the token the tool's server checks: jupyter_server's `algorithm:salt:digest` (passwd_check
    hashes the passphrase followed by the salt), code-server's legacy SHA-256 hex digest. The token is 256 random
    bits, so a fast hash gives nothing to guess."""
    if tool == "jupyterlab":
        return f"sha256:{salt}:{hashlib.sha256((token + salt).encode()).hexdigest()}"
    return hashlib.sha256(token.encode()).hexdigest()


def run_command(tool: str, password_hash: str) -> tuple[list[str], list[str], dict[str, str]]:
    """The run's command, arguments and environment."""
    found = TOOLS[tool]
    return list(found.command), list(found.args), {found.password_env: password_hash}


def run_fields(tool: str, claim: str) -> dict:
    """The fields a workspace's run adds to its job spec: the home volume, mounted at the tool's home, and the
    port its server listens on."""
    found = TOOLS[tool]
    return {"volumes": ({"name": HOME_VOLUME, "persistentVolumeClaim": {"claimName": claim}},),
            "volume_mounts": ({"name": HOME_VOLUME, "mountPath": found.home},),
            "ports": ({"name": "http", "containerPort": found.port},)}


@dataclass(frozen=True)
class WorkspaceSpec:
    name: str  # workspace_object_name
    namespace: str
    team_slug: str
    workspace_id: int
    tool: str
    volume_gib: int
    keep_volume: bool = True  # False once the volume is to go
    run_id: int = 0  # the job that serves it now (0: none, so no Service)
    storage_class: str = ""
    host: str = ""  # its Ingress host ("" for none)
    ingress_class: str = ""


def _labels(spec: WorkspaceSpec) -> dict[str, str]:
    return {**team_labels(spec.team_slug), WORKSPACE_LABEL: str(spec.workspace_id)}


def _metadata(spec: WorkspaceSpec, name: str) -> dict:
    return {"name": name, "namespace": spec.namespace, "labels": _labels(spec)}


def volume_manifest(spec: WorkspaceSpec) -> dict:
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{spec.volume_gib}Gi"}}}
    if spec.storage_class:
        claim["storageClassName"] = spec.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _metadata(spec, volume_name(spec.name)),
            "spec": claim}


def service_manifest(spec: WorkspaceSpec) -> dict:
    port = TOOLS[spec.tool].port
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(spec, spec.name), "spec": {
        "type": "ClusterIP", "selector": {RUN_LABEL: str(spec.run_id)},
        "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]}}


def ingress_manifest(spec: WorkspaceSpec) -> dict:
    backend = {"service": {"name": spec.name, "port": {"number": TOOLS[spec.tool].port}}}
    ingress = {"rules": [{"host": spec.host, "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": backend}]}}], "tls": [{"hosts": [spec.host]}]}
    if spec.ingress_class:
        ingress["ingressClassName"] = spec.ingress_class
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": _metadata(spec, spec.name),
            "spec": ingress}


def workspace_manifests(spec: WorkspaceSpec) -> list[dict]:
    """The volume while it is kept; the Service (and Ingress) while a run serves the workspace."""
    objects = [volume_manifest(spec)] if spec.keep_volume else []
    if spec.run_id:
        objects.append(service_manifest(spec))
        if spec.host:
            objects.append(ingress_manifest(spec))
    return objects


def port_forward_command(*, namespace: str, name: str, tool: str) -> str:
    port = TOOLS[tool].port
    return shlex.join(["kubectl", "-n", namespace, "port-forward", f"service/{name}", f"{port}:{port}"])


def host_for(pattern: str, *, name: str, team: str) -> str:
    """The workspace's host under the platform's pattern (`{workspace}` and `{team}` filled in), or ''."""
    return pattern.format(workspace=name, team=team).lower() if pattern else ""
