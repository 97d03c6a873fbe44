"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver and kube-controller-manager, as built by
`make controlplane-bin` from the Go module beside this file into `var/bin/`.

`start()` generates what the components need (a CA and a serving certificate for 127.0.0.1, a service-account
signing key, a static token file), starts the three processes, waits for `/readyz`, installs the upstream CRDs of
a folder (Kueue, Volcano, KubeRay) and writes a kubeconfig whose context `controlplane` is the cluster admin (group
`system:masters`). `python -m tools.controlplane` (`make controlplane`) does that in the foreground until Ctrl-C.

The flags follow what kubeadm and Kueue's integration framework (envtest) give these binaries; the controller
manager runs its default controllers (namespace, resourcequota, garbagecollector, serviceaccount-token among
them) with one service account each, as kubeadm runs it. Only the standard library, PyYAML and `cryptography`
(already in the lock, through mozilla-django-oidc) are used, so tests and other tools can import this module.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools.controlplane import certs

ROOT = Path(__file__).resolve().parents[2]
BIN_DIR = ROOT / "var" / "bin"
# Where `make controlplane` writes its kubeconfig (documented in docs/operations.md).
KUBECONFIG = ROOT / "var" / "controlplane" / "kubeconfig"
CONTEXT = "controlplane"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
FIELD_MANAGER = "gpu-portal-controlplane"
SERVICE_CIDR = "10.96.0.0/16"
# The static tokens: the admin (system:masters) and the controller manager's own identity, bound by the
# bootstrap RBAC policy to ClusterRole system:kube-controller-manager.
ADMIN_USER = "controlplane-admin"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"


class ControlPlaneError(RuntimeError):
    pass


def missing_binaries(bin_dir: Path = BIN_DIR) -> list[str]:
    return [name for name in BINARIES if not os.access(bin_dir / name, os.X_OK)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ControlPlane:
    """A running control plane. `kubeconfig` holds context `controlplane` (the admin); `add_context` adds others."""

    server: str
    workdir: Path
    kubeconfig: Path
    ca_pem: bytes
    admin_token: str
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    _own_workdir: bool = True

    # --- requests as the admin (plain JSON over TLS; tests and the CRD install use this) ---

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def request(self, method: str, path: str, body=None, *, token: str | None = None,
                content_type: str = "application/json", timeout: float = 30) -> tuple[int, dict]:
        """One request; returns (status, decoded JSON body) for any status, raising only when unreachable."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {token or self.admin_token}", "Accept": "application/json",
            **({"Content-Type": content_type} if data is not None else {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_context()) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw) if raw else {}
        except ValueError:
            return status, {"raw": raw.decode(errors="replace")}

    def apply(self, obj: dict, path: str, *, field_manager: str = FIELD_MANAGER, force: bool = True) -> dict:
        status, body = self.request("PATCH", f"{path}?fieldManager={field_manager}&force={str(force).lower()}",
                                    obj, content_type="application/apply-patch+yaml")
        if status >= 300:
            raise ControlPlaneError(f"apply {path}: {status} {body.get('message', body)}")
        return body

    # --- kubeconfig ---

    def add_context(self, name: str, token: str) -> None:
        """A context (and user) `name` that authenticates with `token`, in the same kubeconfig file."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"] = [u for u in config["users"] if u["name"] != name] + [{"name": name, "user": {"token": token}}]
        config["contexts"] = [c for c in config["contexts"] if c["name"] != name] + [
            {"name": name, "context": {"cluster": CONTEXT, "user": name}}]
        _write_private(self.kubeconfig, yaml.safe_dump(config, sort_keys=False))

    # --- life cycle ---

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.processes.values())

    def stop(self) -> None:
        # The controller manager first, etcd last: each is still served by what it depends on while it exits.
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- the audit log: every request the API server answered, with its user, verb, object and status ---

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def audit_offset(self) -> int:
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def audit_events(self, since: int = 0, *, user: str | None = None) -> list[dict]:
        """Completed requests logged after byte `since` (an `audit_offset()`), optionally of one user only."""
        with open(self.audit_log, "rb") as f:
            f.seek(since)
            lines = f.read().splitlines()
        events = [json.loads(line) for line in lines if line.strip()]
        return [e for e in events if e.get("stage") == "ResponseComplete"
                and (user is None or e.get("user", {}).get("username") == user)]

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def kubeconfig_text(server: str, ca_pem: bytes, users: dict[str, str], current: str = CONTEXT) -> str:
    """A kubeconfig with one cluster (`controlplane`, the CA inline) and a context per user (name -> token)."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "preferences": {}, "current-context": current,
        "clusters": [{"name": CONTEXT, "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": name, "user": {"token": token}} for name, token in users.items()],
        "contexts": [{"name": name, "context": {"cluster": CONTEXT, "user": name}} for name in users],
    }, sort_keys=False)


def start(*, crds_dir: str | os.PathLike | None = None, kubeconfig: str | os.PathLike | None = None,
          bin_dir: str | os.PathLike = BIN_DIR, workdir: str | os.PathLike | None = None,
          ready_timeout: float = 180, extra_apiserver_args: tuple[str, ...] = ()) -> ControlPlane:
    """Start etcd, kube-apiserver and kube-controller-manager; return once `/readyz` answers and the CRDs of
    `crds_dir` (searched recursively for `*.yaml`) are established. The kubeconfig goes to `kubeconfig` (default:
    inside the work dir, which `stop()` removes). Raises `ControlPlaneError` with the failing component's log."""
    bin_dir = Path(bin_dir)
    if missing := missing_binaries(bin_dir):
        raise ControlPlaneError(f"{', '.join(missing)} not built in {bin_dir}: run `make controlplane-bin`")
    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="gpu-portal-controlplane-")) if own else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    pki = certs.generate(work / "pki")
    admin_token, kcm_token = certs.token(), certs.token()
    # token,user,uid,"group1,group2": kube-apiserver's --token-auth-file format.
    # Metadata of every request (who, which verb on which object, the status), for tests that check what a client
    # did and was allowed to do.
    (work / "audit-policy.yaml").write_text(json.dumps({
        "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata"}]}))
    (work / "tokens.csv").write_text(f'{admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n'
                                     f"{kcm_token},{CONTROLLER_MANAGER_USER},{CONTROLLER_MANAGER_USER}\n")
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    kubeconfig_path = Path(kubeconfig) if kubeconfig else work / "kubeconfig"
    _write_private(kubeconfig_path, kubeconfig_text(server, pki.ca_pem, {CONTEXT: admin_token}))
    _write_private(work / "kcm.kubeconfig", kubeconfig_text(server, pki.ca_pem, {CONTEXT: kcm_token}))
    plane = ControlPlane(server=server, workdir=work, kubeconfig=kubeconfig_path, ca_pem=pki.ca_pem,
                         admin_token=admin_token, _own_workdir=own)
    try:
        _launch(plane, "etcd", [
            str(bin_dir / "etcd"), "--name=controlplane", f"--data-dir={work / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=controlplane=http://127.0.0.1:{peer_port}",
            "--log-level=warn",
            # A throwaway cluster: no fsync (as envtest runs it), so writes do not wait on the disk.
            "--unsafe-no-fsync=true",
        ])
        _launch(plane, "kube-apiserver", [
            str(bin_dir / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--cert-dir={work / 'pki'}", f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}", f"--client-ca-file={pki.ca_cert}",
            f"--token-auth-file={work / 'tokens.csv'}", "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_public}", f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            f"--audit-policy-file={work / 'audit-policy.yaml'}", f"--audit-log-path={work / 'audit.log'}",
            "--profiling=false", "--v=0",
            *extra_apiserver_args,
        ])
        _wait_ready(plane, "kube-apiserver", "/readyz", ready_timeout)
        _launch(plane, "kube-controller-manager", [
            str(bin_dir / "kube-controller-manager"), f"--kubeconfig={work / 'kcm.kubeconfig'}",
            "--controllers=*", "--use-service-account-credentials=true", "--leader-elect=false",
            f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--secure-port=0", "--profiling=false", "--v=0",
            # A namespace's contents and the quota's usage are recomputed at once rather than after the defaults'
            # minutes, so tests see the controllers' work promptly.
            "--resource-quota-sync-period=5s", "--concurrent-namespace-syncs=5",
        ])
        if crds_dir:
            install_crds(plane, Path(crds_dir))
    except BaseException:
        plane.stop()
        raise
    return plane


def _launch(plane: ControlPlane, name: str, args: list[str]) -> None:
    log = open(plane.workdir / f"{name}.log", "wb")  # noqa: SIM115 (the child holds it)
    # Their own session: a Ctrl-C in the terminal reaches this process, which stops them in order.
    plane.processes[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True, cwd=plane.workdir)
    log.close()


def _wait_ready(plane: ControlPlane, name: str, path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        for each, process in plane.processes.items():
            if process.poll() is not None:
                raise ControlPlaneError(f"{each} exited with {process.returncode}:\n{plane.log_tail(each)}")
        try:
            status, body = plane.request("GET", path, timeout=5)
            if status == 200:
                return
            last = f"{status} {body}"
        except OSError as exc:
            last = str(exc)
        time.sleep(0.25)
    raise ControlPlaneError(f"{name} not ready within {timeout:g} s ({last}):\n{plane.log_tail(name)}")


def crd_documents(crds_dir: Path) -> list[dict]:
    docs = []
    for path in sorted(crds_dir.rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "CustomResourceDefinition"]
    return docs


def install_crds(plane: ControlPlane, crds_dir: Path, timeout: float = 60) -> list[str]:
    """Server-side apply every CRD of the folder, then wait until each is Established (served)."""
    names = []
    for crd in crd_documents(crds_dir):
        name = crd["metadata"]["name"]
        plane.apply(crd, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        names.append(name)
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            _, crd = plane.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
            if conditions.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"CRD {name} not established within {timeout:g} s: {conditions}")
            time.sleep(0.1)
    # Established is not yet served: until its storage is ready a CRD's kind answers 429 "storage is
    # (re)initializing". Each served version is listed until it answers.
    for crd in crd_documents(crds_dir):
        spec = crd["spec"]
        for version in (v["name"] for v in spec["versions"] if v.get("served")):
            path = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}?limit=1"
            while (status := plane.request("GET", path)[0]) != 200:
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"{path} still answers {status} after {timeout:g} s")
                time.sleep(0.1)
    return names


@contextlib.contextmanager
def running(**kwargs):
    """`with running(crds_dir=...) as plane:` starts a control plane and stops it on the way out."""
    plane = start(**kwargs)
    try:
        yield plane
    finally:
        plane.stop()
