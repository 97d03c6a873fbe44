"""The batch schedulers themselves on the control plane of `tools.controlplane`: Kueue's manager, Volcano's
scheduler, controller manager and webhook manager, the KubeRay operator, kube-scheduler (for the pods Kueue lets
go) and kwok (fake GPU nodes, and pods that run and complete), as built by `make controllers-bin` from the Go
modules beside this file into `var/bin/`.

`start(plane, schedulers)` launches them against a running `ControlPlane`, each as the cluster admin, with:
- the CRDs the built release expects that the control plane lacks, read from the module's own `config/` folder
  (the portal's pinned CRDs, installed by the control plane, stay as they are);
- webhooks served for real on 127.0.0.1 under a certificate generated here, with the upstream webhook
  configurations (Kueue's `config/components/webhook/manifests.yaml`) pointed at them by URL, as Kueue's
  integration framework (envtest) rewrites them; Volcano's webhook manager registers its own from `--webhook-url`;
- fake nodes (`nodes()`), which kwok keeps Ready; kwok runs pods that a scheduler bound, and completes a Job's
  pod once its `pod-complete.stage.kwok.x-k8s.io/delay` annotation says so (tests set it; unset, a pod runs on).

The processes join `plane.processes`, so `plane.stop()` stops them first, in reverse order, before the control
plane itself.
"""

from __future__ import annotations

import copy
import os
import subprocess
import time
from pathlib import Path

import yaml

from tools import controlplane
from tools.controlplane import ControlPlane, ControlPlaneError, certs

HERE = Path(__file__).resolve().parent
BIN_DIR = controlplane.BIN_DIR
SCHEDULERS = ("kueue", "volcano", "kuberay")
# What each scheduler needs running, in start order; kube-scheduler binds the pods Kueue admits, Volcano's own
# scheduler binds its pods; kwok runs them.
BINARIES = {
    "base": ("kube-scheduler", "kwok"),
    "kueue": ("kueue",),
    "volcano": ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager"),
    "kuberay": ("kuberay-operator",),
}
MODULES = {"kueue": "sigs.k8s.io/kueue", "volcano": "volcano.sh/volcano",
           "kuberay": "github.com/ray-project/kuberay/ray-operator", "kwok": "sigs.k8s.io/kwok"}
# The Kueue integrations the portal's jobs use (jobs/manifests.py: batch Jobs and RayJobs, whose RayCluster
# Kueue also sees); Kueue's default list adds Pods, Deployments and more that the portal never queues.
KUEUE_INTEGRATIONS = ("batch/job", "ray.io/rayjob", "ray.io/raycluster")
# Volcano runs as its development installer (installer/volcano-development.yaml in the module) deploys it: the
# same arguments, webhook configurations and scheduler configuration, with the network-topology-aware plugin the
# portal's HyperNode placement relies on added to the second tier when the installer's default lacks it.
VOLCANO_INSTALLER = "installer/volcano-development.yaml"
VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_DRA_ARGUMENT = "predicate.DynamicResourceAllocationEnable"
_VOLCANO_DEPLOYMENTS = {"volcano-scheduler": "vc-scheduler", "volcano-controllers": "vc-controller-manager",
                        "volcano-admission": "vc-webhook-manager"}
# In-pod paths and service names of the installer's arguments, replaced by what runs here.
_VOLCANO_DROPPED = ("--tls-", "--ca-cert-file", "--admission-conf", "--webhook-namespace", "--webhook-service-name",
                    "--scheduler-conf", "--logtostderr", "2>&1", "--port", "--enable-metrics", "-v=")


def missing_binaries(schedulers, bin_dir: Path = BIN_DIR) -> list[str]:
    names = [*BINARIES["base"], *(b for s in schedulers for b in BINARIES[s])]
    return [name for name in names if not os.access(Path(bin_dir) / name, os.X_OK)]


def module_dir(name: str) -> Path:
    """The upstream module's source in Go's module cache (its `config/` holds the CRDs, webhook manifests and
    kwok's stages), as resolved by our module that builds it."""
    import json

    # `go mod download` fetches it into the module cache if a cleaned cache lacks it, and says where it is.
    out = subprocess.run(["go", "mod", "download", "-json", MODULES[name]], cwd=HERE / name, check=True,
                         capture_output=True, text=True)
    return Path(json.loads(out.stdout)["Dir"])


def _yaml_documents(paths) -> list[dict]:
    docs = []
    for path in paths:
        # libyaml's loader: the CRDs run to megabytes, which the pure-Python one takes seconds over.
        docs += [d for d in yaml.load_all(Path(path).read_text(), Loader=yaml.CSafeLoader) if d]
    return docs


def install_missing_crds(plane: ControlPlane, paths) -> list[str]:
    """Apply the CRDs of `paths` that the cluster does not serve yet; wait until they are established."""
    added = []
    for crd in _yaml_documents(paths):
        if crd.get("kind") != "CustomResourceDefinition":
            continue
        name = crd["metadata"]["name"]
        status, _ = plane.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        if status == 404:
            crd.pop("status", None)
            plane.apply(crd, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            added.append(name)
    deadline = time.monotonic() + 60
    for name in added:
        while True:
            _, crd = plane.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or []):
                break
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"CRD {name} not established")
            time.sleep(0.1)
    return added


def webhook_configurations(manifests: list[dict], *, url: str, ca_pem: bytes, keep) -> list[dict]:
    """Upstream webhook configurations with each webhook's Service reference replaced by a URL on `url`, keeping
    only the webhooks whose path `keep(path)` accepts (a webhook for a kind whose integration is off has no
    handler behind it, and its failurePolicy Fail would refuse every such object)."""
    import base64

    ca = base64.b64encode(ca_pem).decode()
    out = []
    for doc in manifests:
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        hooks = []
        for hook in doc.get("webhooks", []):
            path = hook["clientConfig"]["service"]["path"]
            if keep(path):
                hooks.append({**hook, "clientConfig": {"url": url + path, "caBundle": ca}})
        if hooks:
            out.append({**doc, "metadata": {"name": doc["metadata"]["name"]}, "webhooks": hooks})
    return out


# With internal certificate management off, Kueue's manager loads a metrics serving certificate from this fixed
# path and exits without one, even with metrics off (cmd/kueue/main.go); any valid pair will do.
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")


def _kueue_metrics_certs(pki) -> None:
    if not (KUEUE_METRICS_CERTS / "tls.crt").exists():
        KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        (KUEUE_METRICS_CERTS / "tls.crt").write_bytes(pki.serving_cert.read_bytes())
        (KUEUE_METRICS_CERTS / "tls.key").write_bytes(pki.serving_key.read_bytes())


def _kueue_webhook_kept(path: str) -> bool:
    kinds = ("kueue-x-k8s-io", "batch-v1-job", "ray-io-v1-rayjob", "ray-io-v1-raycluster")
    return any(kind in path for kind in kinds)


class Controllers:
    """What `start()` launched: ports, the webhook CA, and each controller's log."""

    def __init__(self, plane: ControlPlane, schedulers, bin_dir: Path, kueue_config: dict | None = None,
                 dra: bool = False, volcano_conf: dict | None = None):
        self.plane, self.schedulers, self.bin_dir, self.dra = plane, tuple(schedulers), Path(bin_dir), dra
        self.volcano_conf = copy.deepcopy(volcano_conf)
        self.kueue_config = dict(kueue_config or {})
        self.workdir = plane.workdir / "controllers"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki = certs.generate(self.workdir / "webhook-pki")
        self.certdir = self.workdir / "webhook-certs"
        self.certdir.mkdir(exist_ok=True)
        # controller-runtime's webhook server reads tls.crt/tls.key from its cert dir.
        (self.certdir / "tls.crt").write_bytes(self.pki.serving_cert.read_bytes())
        (self.certdir / "tls.key").write_bytes(self.pki.serving_key.read_bytes())

    def launch(self, name: str, args: list[str]) -> None:
        log = open(self.plane.workdir / f"{name}.log", "wb")  # noqa: SIM115 (the child holds it)
        self.plane.processes[name] = subprocess.Popen(
            [str(self.bin_dir / name), *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=self.workdir, env={**os.environ, "KUBECONFIG": str(self.plane.kubeconfig)})
        log.close()

    def wait_http(self, name: str, url: str, timeout: float = 120, *, any_status: bool = False) -> None:
        """Until `url` (a health endpoint on loopback; HTTPS under the webhook certificate) answers 200, or answers
        at all with `any_status` (a webhook server, whose paths answer only admission reviews)."""
        import ssl
        import urllib.error
        import urllib.request

        context = ssl.create_default_context(cadata=self.pki.ca_pem.decode()) if url.startswith("https") else None

        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            process = self.plane.processes[name]
            if process.poll() is not None:
                raise ControlPlaneError(f"{name} exited with {process.returncode}:\n{self.plane.log_tail(name)}")
            try:
                with urllib.request.urlopen(url, timeout=5, context=context) as response:
                    if response.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                if any_status:
                    return
                last = str(exc)
            except OSError as exc:
                last = str(exc)
            time.sleep(0.5)
        raise ControlPlaneError(f"{name} not ready within {timeout:g} s ({last}):\n{self.plane.log_tail(name)}")

    def ensure_namespace(self, name: str) -> None:
        self.plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                         f"/api/v1/namespaces/{name}")

    # --- the components ---

    def start_base(self) -> None:
        self.launch("kube-scheduler", [
            f"--kubeconfig={self.plane.kubeconfig}", "--leader-elect=false", "--secure-port=0", "--v=0"])
        kwok_dir = module_dir("kwok") / "kustomize" / "stage"
        # Upstream's general pod stages, in its kustomization's order (create: IP and Initialized; init containers;
        # ready; complete; delete), and the fast node stages.
        pod_stages = yaml.safe_load((kwok_dir / "pod" / "general" / "kustomization.yaml").read_text())["resources"]
        stages = _yaml_documents([kwok_dir / "node" / "fast" / "node-initialize.yaml",
                                  kwok_dir / "node" / "heartbeat" / "node-heartbeat.yaml",
                                  *(kwok_dir / "pod" / "general" / name for name in pod_stages)])
        for stage in stages:
            # Without upstream's random extra of up to 5 s per stage, runs are repeatable and quicker.
            stage["spec"].get("delay", {}).pop("jitterDurationMilliseconds", None)
            if stage["metadata"]["name"] == "pod-complete":
                # A pod runs until a test says when it ends (the annotation); upstream's default is a second.
                stage["spec"]["delay"]["durationMilliseconds"] = 24 * 3600 * 1000
        config = self.workdir / "kwok.yaml"
        # A configuration file's options are not defaulted as the flags' are (kwok exits on a parallelism of 0):
        # upstream's defaults (pkg/apis/config/v1alpha1/zz_generated.defaults.go) are spelled out.
        config.write_text(yaml.safe_dump_all([
            {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
             "options": {"enableCRDs": [], "podPlayStageParallelism": 4, "nodePlayStageParallelism": 4,
                         "nodeLeaseParallelism": 4, "podsOnNodeSyncParallelism": 1}}, *stages]))
        self.launch("kwok", [
            f"--kubeconfig={self.plane.kubeconfig}", f"--config={config}",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--cidr=10.0.0.1/16",
            "--node-ip=10.0.0.1", f"--server-address=127.0.0.1:{controlplane.free_port()}"])

    def start_kueue(self) -> None:
        source = module_dir("kueue")
        install_missing_crds(self.plane, sorted((source / "config/components/crd/bases").glob("*.yaml")))
        self.ensure_namespace("kueue-system")
        webhook_port, health_port = controlplane.free_port(), controlplane.free_port()
        config = self.workdir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(self.certdir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": list(KUEUE_INTEGRATIONS)},
            **self.kueue_config,
        }))
        _kueue_metrics_certs(self.pki)
        # The on-demand visibility API server (a feature on by default) wants its own certificate in /visibility and
        # port 8082; the portal reads pending workloads from their status, so it is off.
        self.launch("kueue", [f"--config={config}", f"--kubeconfig={self.plane.kubeconfig}", "--zap-log-level=2",
                              "--feature-gates=VisibilityOnDemand=false"])
        self.wait_http("kueue", f"http://127.0.0.1:{health_port}/readyz")
        manifests = _yaml_documents([source / "config/components/webhook/manifests.yaml"])
        for doc in webhook_configurations(manifests, url=f"https://127.0.0.1:{webhook_port}",
                                          ca_pem=self.pki.ca_pem, keep=_kueue_webhook_kept):
            kind = doc["kind"].lower() + "s"
            name = doc["metadata"]["name"] = f"kueue-{doc['metadata']['name']}"
            self.plane.apply(doc, f"/apis/admissionregistration.k8s.io/v1/{kind}/{name}")


    def start_volcano(self) -> None:
        source = module_dir("volcano")
        # The controller manager starts its controllers only once every informer has synced, JobFlow's and
        # JobTemplate's (flow.volcano.sh) among them, so their CRDs are installed too.
        install_missing_crds(self.plane, sorted((source / "config/crd/volcano/bases").glob("*.yaml"))
                             + sorted((source / "config/crd/jobflow/bases").glob("*.yaml")))
        self.ensure_namespace(VOLCANO_NAMESPACE)
        installer = _yaml_documents([source / VOLCANO_INSTALLER])
        args = {}
        for doc in installer:
            if doc["kind"] == "ConfigMap":
                doc["metadata"]["namespace"] = VOLCANO_NAMESPACE
                self.plane.apply(doc, f"/api/v1/namespaces/{VOLCANO_NAMESPACE}/configmaps/{doc['metadata']['name']}")
            if doc["kind"] == "Deployment" and doc["metadata"]["name"] in _VOLCANO_DEPLOYMENTS:
                [container] = doc["spec"]["template"]["spec"]["containers"]
                args[_VOLCANO_DEPLOYMENTS[doc["metadata"]["name"]]] = [
                    a for a in container.get("args", []) if not a.startswith(_VOLCANO_DROPPED)]
        conf = next(d for d in installer if d["kind"] == "ConfigMap"
                    and d["metadata"]["name"] == "volcano-scheduler-configmap")["data"]["volcano-scheduler.conf"]
        conf = yaml.safe_load(conf)
        plugins = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
        if "network-topology-aware" not in plugins:
            conf["tiers"][-1]["plugins"].append({"name": "network-topology-aware"})
        if self.volcano_conf is not None:
            # A configuration of the caller's (e.g. the portal's, with the reclaim action and the capacity plugin)
            # instead of the installer's, as an operator would put it in volcano-scheduler-configmap.
            conf = self.volcano_conf
        for plugin in (p for tier in conf["tiers"] for p in tier["plugins"] if p["name"] == "predicates" and self.dra):
            # v1.14's predicates plugin allocates ResourceClaims (Kubernetes' DynamicResources plugin) only when
            # told to (pkg/scheduler/plugins/predicates/predicates.go, predicate.DynamicResourceAllocationEnable,
            # false by default; v1.15 defaults it to the DynamicResourceAllocation feature gate, on since 1.34).
            plugin.setdefault("arguments", {})[VOLCANO_DRA_ARGUMENT] = True
        (self.workdir / "volcano-scheduler.conf").write_text(yaml.safe_dump(conf))
        kubeconfig = f"--kubeconfig={self.plane.kubeconfig}"
        tls = [f"--tls-cert-file={self.pki.serving_cert}", f"--tls-private-key-file={self.pki.serving_key}",
               f"--ca-cert-file={self.pki.ca_cert}"]
        webhook_port, health = controlplane.free_port(), {}
        for name in _VOLCANO_DEPLOYMENTS.values():
            health[name] = controlplane.free_port()
        # The webhook configurations first: the webhook manager only adds its CA to them, waiting until they exist.
        for doc in webhook_configurations([d for d in installer if d["kind"].endswith("WebhookConfiguration")],
                                          url=f"https://127.0.0.1:{webhook_port}", ca_pem=self.pki.ca_pem,
                                          keep=lambda path: True):
            kind = doc["kind"].lower() + "s"
            self.plane.apply(doc, f"/apis/admissionregistration.k8s.io/v1/{kind}/{doc['metadata']['name']}")
        self.launch("vc-webhook-manager", [
            *args["vc-webhook-manager"], kubeconfig, *tls, "--listen-address=127.0.0.1", f"--port={webhook_port}",
            f"--webhook-url=https://127.0.0.1:{webhook_port}", "--graceful-shutdown-time=1s",
            f"--healthz-address=127.0.0.1:{health['vc-webhook-manager']}", "-v=2"])
        # The scheduler creates the root and default queues through the queue webhooks as it starts and exits if
        # they fail. The webhook manager answers its health check before it syncs its informers and opens the webhook
        # port (cmd/webhook-manager/app/server.go), so the wait is for the webhook port itself.
        self.wait_http("vc-webhook-manager", f"https://127.0.0.1:{webhook_port}/queues/mutate", any_status=True)
        self.launch("vc-controller-manager", [
            *args["vc-controller-manager"], kubeconfig,
            f"--healthz-address=127.0.0.1:{health['vc-controller-manager']}",
            f"--listen-address=127.0.0.1:{controlplane.free_port()}", "-v=2"])
        self.launch("vc-scheduler", [
            *args["vc-scheduler"], kubeconfig, f"--scheduler-conf={self.workdir / 'volcano-scheduler.conf'}",
            f"--healthz-address=127.0.0.1:{health['vc-scheduler']}",
            f"--listen-address=127.0.0.1:{controlplane.free_port()}", f"--cache-dump-dir={self.workdir}", "-v=2"])
        for name, port in health.items():
            # The webhook manager serves its health check over TLS with its serving certificate.
            scheme = "https" if name == "vc-webhook-manager" else "http"
            self.wait_http(name, f"{scheme}://127.0.0.1:{port}/healthz")

    def start_kuberay(self) -> None:
        """The KubeRay operator, as its Helm chart runs it (no webhooks, ENABLE_WEBHOOKS unset). Beside Volcano it
        runs with `--batch-scheduler=volcano`, so a RayJob gets a PodGroup (`ray-<job>-pg`) and its pods Volcano's
        scheduler; under Kueue it needs nothing: Kueue suspends and admits the RayJob through its own integration."""
        source = module_dir("kuberay")
        # The RayService and RayCronJob kinds its controllers also watch (the portal's CRDs have the other two).
        install_missing_crds(self.plane, sorted((source / "config/crd/bases").glob("*.yaml")))
        health = controlplane.free_port()
        args = [f"--health-probe-bind-address=127.0.0.1:{health}", "--metrics-addr=0",
                "--enable-leader-election=false", "--log-stdout-encoder=console"]
        if "volcano" in self.schedulers:
            args.append("--batch-scheduler=volcano")
        self.launch("kuberay-operator", args)
        self.wait_http("kuberay-operator", f"http://127.0.0.1:{health}/readyz")


def start(plane: ControlPlane, schedulers=SCHEDULERS, *, bin_dir: str | os.PathLike = BIN_DIR,
          kueue_config: dict | None = None, dra: bool = False, volcano_conf: dict | None = None) -> Controllers:
    """Launch the controllers of `schedulers` (any of kueue, volcano, kuberay) against `plane`; return once each
    one's health endpoint answers and its webhooks are registered. `kueue_config` adds to (or replaces top-level
    fields of) Kueue's Configuration, e.g. a shorter `waitForPodsReady` or `resources.deviceClassMappings`. `dra`:
    Volcano's predicates plugin allocates ResourceClaims (kube-scheduler always does). `volcano_conf`: the Volcano
    scheduler's configuration (`volcano-scheduler.conf`, parsed) instead of its development installer's."""
    schedulers = tuple(schedulers)
    if unknown := set(schedulers) - set(SCHEDULERS):
        raise ControlPlaneError(f"unknown scheduler(s) {', '.join(sorted(unknown))}: choose from {SCHEDULERS}")
    if missing := missing_binaries(schedulers, Path(bin_dir)):
        raise ControlPlaneError(f"{', '.join(missing)} not built in {bin_dir}: run `make controllers-bin`")
    running = Controllers(plane, schedulers, Path(bin_dir), kueue_config, dra, volcano_conf)
    running.start_base()
    # In SCHEDULERS' order: KubeRay's Volcano plugin needs the PodGroup kind Volcano's start installs.
    for name in sorted(schedulers, key=SCHEDULERS.index):
        getattr(running, f"start_{name}")()
    return running


def add_node(plane: ControlPlane, name: str, *, labels: dict, allocatable: dict, taints: list | None = None) -> None:
    """A fake node kwok manages (its annotation): labels and taints on the Node, capacity in its status, which
    kwok's node-initialize stage keeps while it marks the node Ready."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok", **labels},
        "annotations": {"kwok.x-k8s.io/node": "fake"}}, "spec": {"taints": list(taints or [])}}
    plane.apply(node, f"/api/v1/nodes/{name}")
    amounts = {key: str(value) for key, value in allocatable.items()}
    status, body = plane.request("PATCH", f"/api/v1/nodes/{name}/status",
                                 {"status": {"capacity": amounts, "allocatable": amounts}},
                                 content_type="application/merge-patch+json")
    if status >= 300:
        raise ControlPlaneError(f"node {name} status: {status} {body.get('message', body)}")


def publish_devices(plane: ControlPlane, objects: list[dict]) -> None:
    """What a DRA driver publishes, without a kubelet plugin: its DeviceClasses (its chart installs them) and a
    ResourceSlice per node (its kubelet plugin's), both cluster-scoped `resource.k8s.io/v1`. kube-scheduler's
    DynamicResources plugin (and Volcano's predicates plugin) allocate claims from the slices and write the claim's
    allocation; kwok then runs the pod, as no kubelet prepares the devices."""
    plural = {"DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices"}
    for obj in objects:
        plane.apply(obj, f"/apis/resource.k8s.io/v1/{plural[obj['kind']]}/{obj['metadata']['name']}")

