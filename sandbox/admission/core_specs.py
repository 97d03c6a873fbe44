"""The API server's own validation of more built-in kinds' specs (kubernetes, paraphrased):

- pkg/apis/core/validation/validation.go: ValidateService (port names, numbers, protocols, target ports, type,
  selector; the cluster IP must lie in the service range, as the allocator says), ValidateConfigMap (keys),
  validateResourceQuotaScopes, ValidatePodSpec's containers and images;
- pkg/apis/rbac/validation/validation.go: ValidateRoleBinding (roleRef, subjects);
- pkg/apis/networking/validation/validation.go: ValidateNetworkPolicySpec (selectors, ports, CIDRs, policy types);
- pkg/apis/batch/validation/validation.go: ValidateJobSpec (counts, completion mode, success policy, pod failure
  policy, a manual selector);
- pkg/apis/scheduling/validation/validation.go: a PriorityClass's preemption policy.

A value that is a list or a structure is shown as Go's field errors show it: JSON."""

from __future__ import annotations

import ipaddress
import json
import re

from . import fields as f

_SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/16")  # the range the reference control plane serves
_PORT_RANGE = "must be between 1 and 65535, inclusive"
_NON_NEGATIVE = "must be greater than or equal to 0"
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_QUOTA_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                 "CrossNamespacePodAffinity", "VolumeAttributesClass")
_POD_COUNT = {"pods"}
_POD_COMPUTE = {"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}
_PVC = {"persistentvolumeclaims", "requests.storage"}
RBAC_GROUP = "rbac.authorization.k8s.io"


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def invalid_json(field: str, value, detail: str) -> dict:
    return f.cause(field, f"Invalid value: {_json(value)}: {detail}")


def _dicts(items) -> list[tuple[int, dict]]:
    return [(i, item) for i, item in enumerate(items) if isinstance(item, dict)] if isinstance(items, list) else []


def labels_causes(labels, field: str) -> list[dict]:
    """ValidateLabels: each key a qualified name, each value a label value, both reported at the map's path."""
    causes = []
    for key, value in (labels.items() if isinstance(labels, dict) else ()):
        causes += f.label_name_causes(field, key)
        if isinstance(value, str):
            causes += [f.invalid(field, value, m) for m in f.is_label_value(value)]
    return causes


POD_RESTART_POLICIES = ("Always", "OnFailure", "Never")
JOB_RESTART_POLICIES = ("OnFailure", "Never")


def restart_policy_causes(policy, field: str, allowed: tuple[str, ...]) -> list[dict]:
    """A pod's restart policy one of `allowed`; for a Job's pods (validateJobSpec) any other, "Always" (what an unset
    one decodes to) included, is a required one."""
    if policy in allowed:
        return []
    if allowed == JOB_RESTART_POLICIES:
        return [f.required(field, "valid values: " + ", ".join(f'"{p}"' for p in allowed))]
    return [f.required(field, "") if not policy else f.not_supported(field, policy, allowed)]


def device_request_causes(obj: dict) -> list[dict]:
    """A ResourceClaimTemplate's device requests (resource.k8s.io/v1 validateDeviceRequest, the part the portal's
    claims use): each name a DNS label, an exact request naming its device class, a known allocation mode."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    devices = (spec.get("spec") or {}).get("devices") if isinstance(spec.get("spec"), dict) else None
    causes = []
    for i, request in _dicts((devices or {}).get("requests") if isinstance(devices, dict) else None):
        path = f"spec.spec.devices.requests[{i}]"
        name = request.get("name")
        if isinstance(name, str):
            causes += [f.invalid(f"{path}.name", name, m) for m in f.is_dns1123_label(name)]
        exactly = request.get("exactly")
        if isinstance(exactly, dict):
            if not exactly.get("deviceClassName"):
                causes.append(f.required(f"{path}.exactly.deviceClassName"))
            mode = exactly.get("allocationMode")
            if mode not in (None, "", "All", "ExactCount"):
                causes.append(f.not_supported(f"{path}.exactly.allocationMode", mode, ("All", "ExactCount")))
    return causes


# Service ---------------------------------------------------------------------------------------------------------

def service_causes(obj: dict) -> list[dict]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    causes = []
    ports = _dicts(spec.get("ports"))
    names: set = set()
    for i, port in ports:
        path = f"spec.ports[{i}]"
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            causes.append(f.required(f"{path}.name"))
        elif name:
            causes += [f.invalid(f"{path}.name", name, m) for m in f.is_dns1123_label(name)]
            if name in names:
                causes.append(f.duplicate(f"{path}.name", name))
            names.add(name)
        number = port.get("port")
        if isinstance(number, int) and not 1 <= number <= 65535:
            causes.append(f.invalid(f"{path}.port", number, _PORT_RANGE))
        protocol = port.get("protocol")
        if protocol not in ("SCTP", "TCP", "UDP"):
            causes.append(f.not_supported(f"{path}.protocol", protocol, ("SCTP", "TCP", "UDP")))
        target = port.get("targetPort")
        if isinstance(target, int) and not 1 <= target <= 65535:
            causes.append(f.invalid(f"{path}.targetPort", target, _PORT_RANGE))
    kind = spec.get("type")
    if kind not in ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort"):
        causes.append(f.not_supported("spec.type", kind, ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")))
    causes += labels_causes(spec.get("selector"), "spec.selector")
    if not causes:
        causes += _cluster_ip_causes(spec)
    return causes


def _cluster_ip_causes(spec: dict) -> list[dict]:
    """What the ClusterIP allocator refuses (pkg/registry/core/service/ipallocator), reported on create."""
    ips = [ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if isinstance(ip, str) and ip]
    for ip in ips:
        if ip == "None":
            continue
        try:
            inside = ipaddress.ip_address(ip) in _SERVICE_CIDR
        except ValueError:
            continue
        if not inside:
            return [invalid_json("spec.clusterIPs", ips, f"failed to allocate IP {ip}: the provided IP ({ip}) is not "
                                                         f"in the valid range. The range of valid IPs is "
                                                         f"{_SERVICE_CIDR}")]
    return []


# ConfigMap, ResourceQuota ----------------------------------------------------------------------------------------

def binary_data_error(obj: dict) -> str | None:
    """Go's base64 decoder on binaryData (at decoding, so a 400): where the first byte it cannot take is."""
    for value in (obj.get("binaryData") or {}).values() if isinstance(obj.get("binaryData"), dict) else ():
        if not isinstance(value, str):
            continue
        stripped = value.rstrip("=")
        bad = next((i for i, ch in enumerate(stripped) if not (ch.isascii() and (ch.isalnum() or ch in "+/"))), None)
        if bad is None and len(value) % 4:
            bad = len(value) - len(value) % 4
        if bad is not None:
            return f"illegal base64 data at input byte {bad}"
    return None


def config_map_causes(obj: dict) -> list[dict]:
    causes = []
    for part in ("data", "binaryData"):
        for key in obj.get(part) or {} if isinstance(obj.get(part), dict) else ():
            if len(key) > 253:
                causes.append(f.invalid(f"{part}[{key}]", key, "must be no more than 253 characters"))
            if not _CONFIG_KEY.match(key):
                causes.append(f.invalid(f"{part}[{key}]", key, f.regex_error(
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'", "[-._a-zA-Z0-9]+",
                    "key.name", "KEY_NAME", "key-name")))
    return causes


def _scope_fits(scope: str, resource: str) -> bool:
    """IsResourceQuotaScopeValidForResource."""
    if scope == "BestEffort":
        return resource in _POD_COUNT
    if scope == "VolumeAttributesClass":
        return resource in _PVC
    if scope in _QUOTA_SCOPES:
        return resource in _POD_COUNT | _POD_COMPUTE
    return True


def quota_scope_causes(spec: dict, standard: set) -> list[dict]:
    scopes = spec.get("scopes")
    if not isinstance(scopes, list) or not scopes:
        return []
    causes = []
    hard = sorted(spec.get("hard") or {}) if isinstance(spec.get("hard"), dict) else []
    for scope in scopes:
        if scope not in _QUOTA_SCOPES:
            causes.append(invalid_json("spec.scopes", scopes, "unsupported scope"))
        causes += [invalid_json("spec.scopes", scopes, "unsupported scope applied to resource")
                   for resource in hard if resource in standard and not _scope_fits(scope, resource)]
    for pair in (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")):
        if set(pair) <= set(scopes):
            causes.append(invalid_json("spec.scopes", scopes, "conflicting scopes"))
    return causes


# RoleBinding, NetworkPolicy, PriorityClass -----------------------------------------------------------------------

def role_binding_causes(obj: dict) -> list[dict]:
    ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
    causes = []
    if ref.get("apiGroup") != RBAC_GROUP:
        causes.append(f.not_supported("roleRef.apiGroup", ref.get("apiGroup"), (RBAC_GROUP,)))
    if ref.get("kind") not in ("Role", "ClusterRole"):
        causes.append(f.not_supported("roleRef.kind", ref.get("kind"), ("Role", "ClusterRole")))
    if not ref.get("name"):
        causes.append(f.required("roleRef.name"))
    for i, subject in _dicts(obj.get("subjects")):
        path = f"subjects[{i}]"
        if not subject.get("name"):
            causes.append(f.required(f"{path}.name"))
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            if subject.get("apiGroup"):
                causes.append(f.not_supported(f"{path}.apiGroup", subject["apiGroup"], ("",)))
        elif kind in ("User", "Group"):
            if subject.get("apiGroup") != RBAC_GROUP:
                causes.append(f.not_supported(f"{path}.apiGroup", subject.get("apiGroup"), (RBAC_GROUP,)))
        else:
            causes.append(f.not_supported(f"{path}.kind", kind, ("ServiceAccount", "User", "Group")))
    return causes


def _network_peer_causes(peers, field: str) -> list[dict]:
    causes = []
    for i, peer in _dicts(peers):
        for key in ("podSelector", "namespaceSelector"):
            if isinstance(peer.get(key), dict):
                causes += labels_causes(peer[key].get("matchLabels"), f"{field}[{i}].{key}.matchLabels")
        block = peer.get("ipBlock")
        if isinstance(block, dict):
            try:
                ipaddress.ip_network(block.get("cidr") or "", strict=False)
            except ValueError:
                causes.append(f.invalid(f"{field}[{i}].ipBlock.cidr", block.get("cidr") or "",
                                        "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
    return causes


def network_policy_causes(obj: dict) -> list[dict]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    selector = spec.get("podSelector") if isinstance(spec.get("podSelector"), dict) else {}
    causes = labels_causes(selector.get("matchLabels"), "spec.podSelector.matchLabels")
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for i, rule in _dicts(spec.get(direction)):
            for j, port in _dicts(rule.get("ports")):
                number = port.get("port")
                if isinstance(number, int) and not 1 <= number <= 65535:
                    causes.append(f.invalid(f"spec.{direction}[{i}].ports[{j}].port", number, _PORT_RANGE))
            causes += _network_peer_causes(rule.get(peers), f"spec.{direction}[{i}].{peers}")
    for i, kind in enumerate(spec.get("policyTypes") or ()):
        if kind not in ("Ingress", "Egress"):
            causes.append(f.not_supported(f"spec.policyTypes[{i}]", kind, ("Ingress", "Egress")))
    return causes


def priority_class_policy_causes(obj: dict) -> list[dict]:
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in ("PreemptLowerPriority", "Never"):
        return [f.not_supported("preemptionPolicy", policy, ("PreemptLowerPriority", "Never"))]
    return []


# Job -------------------------------------------------------------------------------------------------------------

def _success_policy_value(policy: dict) -> dict:
    """The internal Go type's rendering (no JSON tags): {"Rules":[{"SucceededIndexes":...,"SucceededCount":...}]}."""
    return {"Rules": [{"SucceededIndexes": rule.get("succeededIndexes"), "SucceededCount": rule.get("succeededCount")}
                      for _, rule in _dicts(policy.get("rules"))]}


def job_spec_causes(spec: dict) -> list[dict]:
    causes = []
    for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        value = spec.get(key)
        if isinstance(value, int) and value < 0:
            causes.append(f.invalid(f"spec.{key}", value, _NON_NEGATIVE))
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        causes.append(f.not_supported("spec.completionMode", mode, ("NonIndexed", "Indexed")))
    policy = spec.get("successPolicy")
    if isinstance(policy, dict) and mode != "Indexed":
        causes.append(invalid_json("spec.successPolicy", _success_policy_value(policy), "requires indexed completion "
                                                                                          "mode"))
    failure = spec.get("podFailurePolicy") if isinstance(spec.get("podFailurePolicy"), dict) else {}
    for i, rule in _dicts(failure.get("rules")):
        codes = rule.get("onExitCodes") if isinstance(rule.get("onExitCodes"), dict) else {}
        if codes.get("operator") == "In":
            causes += [f.invalid(f"spec.podFailurePolicy.rules[{i}].onExitCodes.values[{j}]", 0,
                                 "must not be 0 for the In operator")
                       for j, value in enumerate(codes.get("values") or ()) if value == 0]
    if spec.get("manualSelector") is True and not spec.get("selector"):
        causes += [f.required("spec.selector"),
                   f.cause("spec.template.metadata.labels", "Invalid value: null: `selector` does not match template "
                                                            "`labels`")]
    return causes


def containers_required_causes(spec, field: str) -> list[dict]:
    """A pod spec names at least one container, and each its image."""
    if not isinstance(spec, dict):
        return []
    containers = spec.get("containers")
    if not containers:
        return [f.required(f"{field}.containers")]
    return [f.required(f"{field}.containers[{i}].image") for i, ctr in _dicts(containers) if not ctr.get("image")]
