"""How a flavor's GPUs are shared, and what each way needs from the cluster.

Time-slicing and MPS are NVIDIA's device plugin advertising every GPU `replicas` times (k8s-device-plugin v0.20.0
api/config/v1/replicas.go: `replicas` at least 2; `renameByDefault` renames the resource with the `.shared` suffix
of api/config/v1/consts.go). Dynamic Resource Allocation hands out devices of a DeviceClass through
ResourceClaims (resource.k8s.io/v1); NVIDIA's DRA driver installs the classes `gpu.nvidia.com` and
`mig.nvidia.com` (k8s-dra-driver-gpu v25.12.0 deployments/helm/nvidia-dra-driver-gpu/templates/deviceclass-*.yaml).
"""

import re
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from .choices import Sharing

# Lowercase RFC 1123 subdomain, as DeviceClass names are (apimachinery validation.IsDNS1123Subdomain).
dns_subdomain = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    "Use a DNS subdomain such as gpu.nvidia.com: lowercase letters, digits, '-' and '.'.",
)
SHARED = {Sharing.TIME_SLICED, Sharing.MPS}
# The resources the plugin shares: nvidia.com/gpu, renamed to nvidia.com/gpu.shared under renameByDefault. MPS
# refuses MIG devices (k8s-device-plugin v0.20.0 internal/plugin/mps.go), and time-sliced MIG slices are not offered.
SHARED_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
# The names the device plugin registers, which a DRA flavor's Kueue resource must not reuse.
PLUGIN_RESOURCE = re.compile(r"^nvidia\.com/(gpu(\.shared)?|mig-.+)$")
# Kueue's deviceClassMappings[].name: an optional DNS subdomain prefix and '/', then a DNS label
# (kueue apis/config/v1beta2/configuration_types.go, DeviceClassMapping).
LOGICAL_RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                              r"[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# resource.k8s.io/v1 CELDeviceSelector.expression is at most 10 Ki characters (kubernetes
# staging/src/k8s.io/api/resource/v1/types.go, CELSelectorExpressionMaxLength).
CEL_MAX_LENGTH = 10 * 1024

ISOLATION = {
    Sharing.EXCLUSIVE: "Whole GPUs: nothing is shared.",
    Sharing.MIG: "Hardware isolation: each slice has its own memory and compute engines.",
    Sharing.TIME_SLICED: "No isolation: the pods on a GPU take turns and share all of its memory; one can "
                         "starve or crash the others.",
    Sharing.MPS: "Limits, not walls: MPS caps each share's memory and compute at its part of the GPU, but a "
                 "fault in one client can still stop the others on that GPU.",
    Sharing.DRA: "Devices as the DeviceClass gives them (whole GPUs for gpu.nvidia.com, MIG slices with "
                 "hardware isolation for mig.nvidia.com), claimed per worker and released when the pod ends.",
}


def sharing_isolation() -> list[tuple[str, str]]:
    """(mode's label, the isolation it gives), for the console and the job form."""
    return [(label, ISOLATION[value]) for value, label in Sharing.choices]


def validate_sharing(flavor) -> None:
    """The fields each sharing mode needs and the ones it must leave empty."""
    errors = {}
    if flavor.sharing in SHARED:
        if not flavor.replicas:
            errors["replicas"] = "Time-slicing and MPS need the replicas per GPU that the device plugin advertises."
        if flavor.resource_name not in SHARED_RESOURCES:
            errors["resource_name"] = ("A shared flavor's resource is nvidia.com/gpu, or nvidia.com/gpu.shared when "
                                       "the device plugin's sharing config sets renameByDefault.")
    elif flavor.replicas:
        errors["replicas"] = "Only time-sliced and MPS flavors have replicas."
    if flavor.sharing == Sharing.DRA:
        if not flavor.device_class:
            errors["device_class"] = "A DRA flavor names the DeviceClass its claims ask for, e.g. gpu.nvidia.com."
        if PLUGIN_RESOURCE.match(flavor.resource_name or ""):
            errors["resource_name"] = ("A DRA flavor's resource is the logical name the cluster's Kueue "
                                       "deviceClassMappings give its class (e.g. gpu.nvidia.com/devices), not a "
                                       "device plugin resource.")
        elif not LOGICAL_RESOURCE.match(flavor.resource_name or ""):
            errors["resource_name"] = "Use a name such as gpu.nvidia.com/devices: a DNS subdomain, '/', a DNS label."
        if flavor.device_selector and flavor.device_selector.strip() != flavor.device_selector:
            errors["device_selector"] = "Remove the leading or trailing spaces."
        elif flavor.device_selector and (message := cel_error(flavor.device_selector)):
            errors["device_selector"] = message
    else:
        for field in ("device_class", "device_selector"):
            if getattr(flavor, field):
                errors[field] = "Only DRA flavors have a device class and selector."
    if errors:
        raise ValidationError(errors)
    if flavor.sharing == Sharing.MIG:
        if not flavor.mig_profile:
            raise ValidationError({"resource_name": "A MIG flavor's resource is nvidia.com/mig-<profile>, "
                                                    "e.g. nvidia.com/mig-1g.10gb (under either MIG strategy)."})
        if flavor.gpu_fraction is not None and abs(Decimal(flavor.gpu_fraction) - flavor.fraction_decimal) >= Decimal(
                "0.0001"):
            raise ValidationError({"gpu_fraction": f"A {flavor.mig_profile} slice of a GPU with "
                                                   f"{flavor.mig_slices_per_gpu or 7} slices is "
                                                   f"{flavor.fraction.numerator}/{flavor.fraction.denominator}."})


def cel_error(expression: str) -> str:
    """Why a CEL selector does not compile, or ''. The API server compiles it with the DRA environment (kubernetes
    v1.34 staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go), where the result must be a bool."""
    import celpy  # noqa: PLC0415 (the parser is loaded only when a selector is checked)

    if len(expression) > CEL_MAX_LENGTH:
        return f"At most {CEL_MAX_LENGTH} characters."
    try:
        celpy.Environment().compile(expression)
    except celpy.CELParseError as error:
        return f"Not a CEL expression: {str(error).splitlines()[0]}"
    if "device." not in expression:
        return "The selector tests the device, e.g. device.attributes['gpu.nvidia.com'].productName == '...'."
    return ""


DEVICES_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def quota_resource(flavor, strategy: str) -> str:
    """What a namespace's ResourceQuota counts the flavor as (less `requests.`): its scheduled extended resource,
    or a DRA class's devices (kubernetes pkg/quota/v1/evaluator/core/resource_claims.go)."""
    if flavor.sharing == Sharing.DRA:
        return f"{flavor.device_class}{DEVICES_SUFFIX}"
    return flavor.scheduled_resource(strategy)


def volcano_resource(flavor, strategy: str) -> str:
    """What a Volcano Queue counts the flavor as: a DRA class is `deviceclass/<class>` (volcano
    pkg/scheduler/plugins/capacity/capacity.go, DeviceClassCountPrefix; only the capacity plugin counts it)."""
    if flavor.sharing == Sharing.DRA:
        return f"deviceclass/{flavor.device_class}"
    return flavor.scheduled_resource(strategy)


def mps_limits(flavor) -> dict:
    """What NVIDIA's MPS control daemon sets for each share: the active thread percentage 100/replicas and the
    pinned device memory total/replicas (k8s-device-plugin v0.20.0 cmd/mps-control-daemon/mps/daemon.go)."""
    if flavor.sharing != Sharing.MPS or not flavor.replicas:
        return {}
    return {"thread_percentage": 100 // flavor.replicas,
            "memory_mib": flavor.memory_gb * 1024 // flavor.replicas}


def plugin_config(flavor) -> dict:
    """The device plugin's `sharing` section that advertises this flavor (its config file, version v1)."""
    if flavor.sharing not in SHARED or not flavor.replicas:
        return {}
    key = "mps" if flavor.sharing == Sharing.MPS else "timeSlicing"
    section = {"resources": [{"name": "nvidia.com/gpu", "replicas": flavor.replicas}]}
    if flavor.resource_name.endswith(".shared"):
        section["renameByDefault"] = True
    return {"version": "v1", "sharing": {key: section}}


def cluster_setup(flavor) -> list[tuple[str, str]]:
    """What the cluster's own controllers must be configured with for this flavor, which the portal does not own:
    (what, YAML or words) for the console; the scheduler's part is its backend's (`Backend.flavor_setup`)."""
    from portal.yamltext import dump  # noqa: PLC0415

    if flavor.sharing in SHARED and flavor.replicas:
        notes = [("NVIDIA device plugin config (the GPU Operator's devicePlugin.config)", dump(plugin_config(flavor)))]
        if limits := mps_limits(flavor):
            notes.append(("What MPS enforces per share", f"{limits['thread_percentage']}% of the SMs "
                          f"(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and {limits['memory_mib']} MiB of device memory."))
        return notes
    if flavor.sharing != Sharing.DRA:
        return []
    return [("ResourceQuota entry the portal writes per team", f"{flavor.device_class}{DEVICES_SUFFIX}")]
