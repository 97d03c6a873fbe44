"""Devices handed out by Dynamic Resource Allocation, as dcgm-exporter labels them and the collector bills them.

A DRA pod requests no extended resource, so kube-state-metrics has nothing to count; dcgm-exporter does: run with
`--kubernetes-enable-dra` (KUBERNETES_ENABLE_DRA), it maps each device the kubelet's pod-resources API reports as
a pod's dynamic resource to that pod and adds `dra_claim_name`, `dra_claim_namespace`, `dra_driver_name`,
`dra_pool_name`, `dra_device_name` and, for a MIG device, `dra_mig_profile` to its series (dcgm-exporter
4.5.3-4.8.2 internal/pkg/transformation/kubernetes.go, toDeviceToPodsDRA; const.go). Prometheus never renames those
labels (a scrape target carries none of them), so the claim's namespace reads the same in either scrape shape.
"""

import re
from collections import Counter

from tenants.choices import Sharing

# One series per distinct device a claim holds (HA exporters report it twice), counted per claim namespace.
DRA_ALLOCATED = ("count by (dra_claim_namespace, dra_driver_name, dra_mig_profile, modelName) (group by "
                 "(dra_claim_namespace, dra_driver_name, dra_pool_name, dra_device_name, dra_mig_profile, modelName) "
                 '(DCGM_FI_DEV_POWER_USAGE{dra_claim_name!=""}))')
# NVIDIA's DRA driver publishes whole GPUs and MIG devices under one driver; its classes pick by type
# (k8s-dra-driver-gpu v25.12.0 deployments/helm/nvidia-dra-driver-gpu/templates/deviceclass-gpu.yaml, -mig.yaml).
NVIDIA_DRIVER = "gpu.nvidia.com"
NVIDIA_CLASSES = {"gpu.nvidia.com": NVIDIA_DRIVER, "mig.nvidia.com": NVIDIA_DRIVER}
_PROFILE = re.compile(r"""\.profile\s*==\s*["']([^"']+)["']""")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def dra_unit(driver: str, mig_profile: str = "") -> str:
    """The collector's resource key of a DRA device: its driver, and its MIG profile when it is a slice."""
    return _UNSAFE.sub("_", f"dra/{driver}" + (f"/mig-{mig_profile}" if mig_profile else ""))


def flavor_unit(flavor) -> str:
    """The key a DRA flavor's devices are measured under: its class's driver, plus the MIG profile its selector
    names (`device.attributes['gpu.nvidia.com'].profile == '1g.10gb'`) for a MIG class."""
    driver = NVIDIA_CLASSES.get(flavor.device_class, flavor.device_class)
    profile = ""
    if flavor.device_class == "mig.nvidia.com":
        match = _PROFILE.search(flavor.device_selector or "")
        profile = match[1] if match else ""
    return dra_unit(driver, profile)


def is_dra(flavor) -> bool:
    return flavor.sharing == Sharing.DRA


def claim_labels(labels: dict) -> tuple[str, str, str]:
    """(namespace, resource key, GPU model) of one DRA_ALLOCATED series."""
    return (labels.get("dra_claim_namespace", ""), dra_unit(labels.get("dra_driver_name", ""),
                                                            labels.get("dra_mig_profile", "")),
            labels.get("modelName", ""))


def claim_devices(claims: list[dict], units: dict[str, tuple[str, str, float]]) -> dict[tuple[str, str], Counter]:
    """Devices each ResourceClaim holds, counted per (resource key, GPU model, memory GiB): `units` maps a device
    class to its flavor's. A claim's `status.allocation.devices.results` names one device per entry with the request
    it satisfies (`<request>` or `<request>/<subrequest>`), and the request names the class (kubernetes
    staging/src/k8s.io/api/resource/v1/types.go, DeviceRequestAllocationResult, ExactDeviceRequest)."""
    held: dict[tuple[str, str], Counter] = {}
    for claim in claims:
        meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
        classes = {r.get("name"): (r.get("exactly") or {}).get("deviceClassName", "")
                   for r in (spec.get("devices") or {}).get("requests") or []}
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        counts = Counter(units[cls] for r in results
                         if (cls := classes.get((r.get("request") or "").split("/")[0], "")) in units)
        if counts:
            held[(meta.get("namespace", ""), meta.get("name", ""))] = counts
    return held
