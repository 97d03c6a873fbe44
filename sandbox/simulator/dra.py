"""Dynamic Resource Allocation (resource.k8s.io/v1, GA in Kubernetes 1.34) in the simulated cluster.

- NVIDIA's DRA driver (k8s-dra-driver-gpu v25.12.0): its chart installs the DeviceClasses `gpu.nvidia.com` and
  `mig.nvidia.com` (templates/deviceclass-gpu.yaml, deviceclass-mig.yaml: a CEL selector on the driver and the
  device's `type`), and its kubelet plugin publishes one ResourceSlice per node, pool = node name, each GPU a device
  with attributes `type`, `productName`, `architecture`, `uuid` and capacity `memory` (cmd/gpu-kubelet-plugin/
  deviceinfo.go). With `dra_nodes` set, the simulator does both for its nominal nodes (`gpu-node-<i>`); the chart's
  `extendedResourceName` is left out, as extended resources are not allocated through DRA here.
- The resourceclaim controller (kubernetes pkg/controller/resourceclaim/controller.go) creates a pod's claim
  from its ResourceClaimTemplate, named `<pod>-<claim>-<5 random>`, owned by the pod, annotated
  `resource.kubernetes.io/pod-claim-name`, and records it in the pod's `status.resourceClaimStatuses`; a claim the
  API server refuses (ResourceQuota) leaves the pod unable to start. It deletes the generated claims of a pod that
  has finished. The scheduler's DRA plugin allocates every request's devices on one node (pkg/scheduler/framework/
  plugins/dynamicresources), filtering by the class's and the request's CEL selectors, writing
  `status.allocation.devices.results` and `status.reservedFor`; when nothing fits the pod stays Pending,
  `PodScheduled=False`, "0/N nodes are available: N cannot allocate all claims."
- Quota: Kueue counts a pod's claims as the logical resource its Configuration's `resources.deviceClassMappings`
  give the class, and refuses a class it has no mapping for (kueue pkg/dra/claims.go,
  GetResourceRequestsForResourceClaimTemplates); the configuration is read from the ConfigMap
  `kueue-system/kueue-manager-config` (`controller_manager_config.yaml`), as Kueue's manifests mount it. Volcano's
  capacity plugin counts `deviceclass/<class>` (volcano pkg/scheduler/plugins/capacity/capacity.go).
"""

from __future__ import annotations

import random
from dataclasses import replace
from decimal import Decimal

import yaml

from ..admission.quota import ALL_DEVICES, device_counts
from ..errors import ApiError
from ..quantity import parse_quantity

API = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
CLASSES = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig"}
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
# What a cluster running NVIDIA's driver would map its classes to in Kueue's Configuration (the `--dra-nodes` demo).
NVIDIA_MAPPINGS = {"gpu.nvidia.com": "gpu.nvidia.com/devices", "mig.nvidia.com": "mig.nvidia.com/devices"}


def _cel(expression: str, device: dict) -> bool:
    import celpy  # noqa: PLC0415 (loaded when a claim is allocated)
    from celpy import celtypes  # noqa: PLC0415

    functions = {"quantity": lambda s: celtypes.DoubleType(float(parse_quantity(str(s)))),
                 "compareTo": lambda a, b: celtypes.IntType((a > b) - (a < b))}
    environment = celpy.Environment()
    try:
        return bool(environment.program(environment.compile(expression), functions=functions).evaluate(
            {"device": celpy.json_to_cel(device)}))
    except Exception:  # noqa: BLE001 (a selector that does not evaluate matches no device, as upstream)
        return False


def device_classes() -> list[dict]:
    """The DeviceClasses NVIDIA's DRA driver chart installs: a CEL selector on the driver and the device's type."""
    return [{"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": {"selectors": [{"cel": {
        "expression": f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"}}]}}
        for name, kind in CLASSES.items()]


def resource_slice(node: str, index: int, *, gpus: int = 8, product: str = "NVIDIA H100 80GB HBM3",
                   memory: str = "80Gi") -> dict:
    """The slice the driver's kubelet plugin publishes for `node` (pool = node name): its GPUs as devices."""
    devices = [{"name": f"gpu-{gpu}", "attributes": {
        "type": {"string": "gpu"}, "productName": {"string": product},
        "architecture": {"string": "Hopper"}, "uuid": {"string": f"GPU-{index:04d}-{gpu:04d}"}},
        "capacity": {"memory": {"value": memory}}} for gpu in range(gpus)]
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}


class Devices:
    def __init__(self, objects, *, nodes: int = 0, gpus_per_node: int = 8, product: str = "NVIDIA H100 80GB HBM3",
                 memory: str = "80Gi", seed: int = 0, kueue_mappings: dict[str, str] | None = None):
        self.objects = objects
        self.mappings = kueue_mappings or {}  # installed as Kueue's Configuration when there is none
        self.store = objects.store
        self.nodes, self.gpus_per_node, self.product, self.memory = nodes, gpus_per_node, product, memory
        self._random = random.Random(seed)

    def installed(self) -> bool:
        return self.objects.installed(API, "ResourceClaim")

    def prepare(self) -> None:
        """What the DRA driver's chart and kubelet plugins create: its DeviceClasses and one slice per node."""
        if not self.nodes or not self.installed():
            return
        for manifest in device_classes():
            if self.objects.get(API, "DeviceClass", None, manifest["metadata"]["name"]) is None:
                self.objects.create(manifest)
        for index in range(self.nodes):
            manifest = resource_slice(f"gpu-node-{index}", index, gpus=self.gpus_per_node, product=self.product,
                                      memory=self.memory)
            if self.objects.get(API, "ResourceSlice", None, manifest["metadata"]["name"]) is None:
                self.objects.create(manifest)
        namespace, name, key = KUEUE_CONFIG
        if self.mappings and self.objects.installed("kueue.x-k8s.io/v1beta2", "Workload") and self.objects.get(
                "v1", "ConfigMap", namespace, name) is None:
            by_name: dict[str, list[str]] = {}
            for cls, logical in sorted(self.mappings.items()):
                by_name.setdefault(logical, []).append(cls)
            config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "resources": {
                "deviceClassMappings": [{"name": n, "deviceClassNames": c} for n, c in by_name.items()]}}
            self.objects.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            self.objects.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
                                 "namespace": namespace}, "data": {key: yaml.safe_dump(config, sort_keys=False)}})

    # Quota -----------------------------------------------------------------------------------------------------

    def _template_counts(self, namespace: str, template: dict) -> tuple[dict[str, int], str]:
        counts: dict[str, int] = {}
        for entry in ((template.get("spec") or {}).get("resourceClaims") or []):
            name = entry.get("resourceClaimTemplateName")
            if not name:
                continue
            found = self.objects.get(API, "ResourceClaimTemplate", namespace, name)
            if found is None:
                return {}, f'failed to get claim spec for ResourceClaimTemplate {name}: resourceclaimtemplates ' \
                           f'"{name}" not found'
            for cls, amount in device_counts((found.get("spec") or {}).get("spec") or {}).items():
                counts[cls] = counts.get(cls, 0) + amount
        return counts, ""

    def kueue_mappings(self) -> dict[str, str]:
        namespace, name, key = KUEUE_CONFIG
        config = self.objects.get("v1", "ConfigMap", namespace, name) if self.installed() else None
        try:
            loaded = yaml.safe_load(((config or {}).get("data") or {}).get(key) or "") or {}
        except yaml.YAMLError:
            return {}
        mappings = ((loaded.get("resources") or {}).get("deviceClassMappings") or []) if isinstance(loaded,
                                                                                                     dict) else []
        return {cls: m["name"] for m in mappings if isinstance(m, dict) for cls in m.get("deviceClassNames") or []}

    def pod_sets(self, pod_sets: list, namespace: str, backend: str) -> tuple[list, str]:
        """The pod sets with each pod's devices added to its requests under the name its scheduler counts them by;
        or why Kueue will not count them (an unmapped class)."""
        if not self.installed():
            return pod_sets, ""
        mappings = self.kueue_mappings() if backend == "kueue" else {}
        result = []
        for pod_set in pod_sets:
            counts, error = self._template_counts(namespace, pod_set.template)
            if error:
                return pod_sets, error
            requests = dict(pod_set.requests)
            for cls, amount in counts.items():
                if backend == "kueue" and cls not in mappings:
                    return pod_sets, f"DeviceClass {cls} is not mapped in DRA configuration for podset {pod_set.name}"
                resource = mappings[cls] if backend == "kueue" else f"deviceclass/{cls}"
                requests[resource] = requests.get(resource, Decimal(0)) + amount
            result.append(replace(pod_set, requests=requests))
        return result, ""

    # The resourceclaim controller and the scheduler's DRA plugin ----------------------------------------------

    def claim(self, pod: dict) -> tuple[list[dict], str, str]:
        """Create and allocate the pod's claims: (resourceClaimStatuses, the refusal that stops the pod, why it
        cannot be scheduled)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        statuses, unschedulable = [], ""
        for entry in spec.get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name:
                continue
            template = self.objects.get(API, "ResourceClaimTemplate", meta["namespace"], template_name)
            if template is None:
                return statuses, f'resourceclaimtemplate "{template_name}" not found', ""
            suffix = "".join(self._random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
            name = f"{meta['name'][:63 - len(entry['name']) - 8]}-{entry['name']}-{suffix}"
            body = {"apiVersion": API, "kind": "ResourceClaim", "metadata": {
                "name": name, "namespace": meta["namespace"],
                "labels": dict(((template.get("spec") or {}).get("metadata") or {}).get("labels") or {}),
                "annotations": {POD_CLAIM_ANNOTATION: entry["name"]},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                     "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}]},
                "spec": (template.get("spec") or {}).get("spec") or {}}
            try:
                with self.objects.writing():
                    created = self.store.create(self.store.registry.by_key[("resource.k8s.io", "ResourceClaim")],
                                                body)
            except ApiError as exc:
                return statuses, str(exc), ""
            statuses.append({"name": entry["name"], "resourceClaimName": name})
            if not unschedulable and not self._allocate(created, pod):
                unschedulable = (f"0/{self.nodes} nodes are available: {self.nodes} cannot allocate all claims."
                                 if self.nodes else "0/0 nodes are available: no ResourceSlice publishes devices.")
        return statuses, "", unschedulable

    def _taken(self) -> set[tuple[str, str, str]]:
        taken = set()
        for claim in self.objects.list(API, "ResourceClaim"):
            for result in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                    "results") or []:
                taken.add((result["driver"], result["pool"], result["device"]))
        return taken

    def _matches(self, device: dict, driver: str, selectors: list[dict]) -> bool:
        attributes = {k: next(iter(v.values())) for k, v in (device.get("attributes") or {}).items()}
        capacity = {k: float(parse_quantity(v.get("value", "0"))) for k, v in (device.get("capacity") or {}).items()}
        view = {"driver": driver, "attributes": {driver: attributes}, "capacity": {driver: capacity}}
        return all(_cel(s["cel"]["expression"], view) for s in selectors if (s.get("cel") or {}).get("expression"))

    def _allocate(self, claim: dict, pod: dict) -> bool:
        taken, slices = self._taken(), self.objects.list(API, "ResourceSlice")
        for node in sorted({(s.get("spec") or {}).get("nodeName", "") for s in slices}):
            results, used = [], set(taken)
            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                exactly = request.get("exactly") or {}
                device_class = self.objects.get(API, "DeviceClass", None, exactly.get("deviceClassName", ""))
                if device_class is None:
                    return False
                selectors = ((device_class.get("spec") or {}).get("selectors") or []) + (exactly.get("selectors")
                                                                                          or [])
                want = ALL_DEVICES if exactly.get("allocationMode") == "All" else int(exactly.get("count") or 1)
                for slc in (s for s in slices if (s.get("spec") or {}).get("nodeName", "") == node):
                    spec = slc["spec"]
                    for device in spec.get("devices") or []:
                        key = (spec["driver"], spec["pool"]["name"], device["name"])
                        if want and key not in used and self._matches(device, spec["driver"], selectors):
                            used.add(key)
                            want -= 1
                            results.append({"request": request["name"], "driver": key[0], "pool": key[1],
                                            "device": key[2]})
                if want and exactly.get("allocationMode") != "All":
                    break
            else:
                meta = claim["metadata"]
                self.objects.patch_status(API, "ResourceClaim", meta["namespace"], meta["name"], {
                    "allocation": {"devices": {"results": results}},
                    "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"],
                                     "uid": pod["metadata"].get("uid", "")}]})
                return True
        return False

    def release(self, namespace: str, pods: list[str]) -> None:
        """The claims generated for finished or deleted pods go (their devices are free again)."""
        if not pods or not self.installed():
            return
        names = set(pods)
        for claim in self.objects.list(API, "ResourceClaim", namespace):
            owners = claim["metadata"].get("ownerReferences") or []
            if any(o.get("kind") == "Pod" and o.get("name") in names for o in owners):
                self.objects.delete(API, "ResourceClaim", namespace, claim["metadata"]["name"])
