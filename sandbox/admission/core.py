"""The hand-written validation and defaulting of kube-apiserver for the core kinds the portal writes.

Sources (Kubernetes, at the release the sandbox reports: sandbox/upstream.py):
- pkg/apis/core/validation/validation.go: validateContainers (names, ports, env, volumeMounts), validateEnv,
  ValidateResourceRequirements, validateRestartPolicy, ValidateResourceQuota, ValidateLimitRange, ValidateService
  (names are DNS-1035 labels: ValidateServiceName = NameIsDNS1035Label).
- pkg/apis/core/v1/defaults.go: SetDefaults_LimitRangeItem, SetDefaults_PodSpec, SetDefaults_Container,
  SetDefaults_ContainerPort.
- Volumes, nodeSelector, affinity, tolerations and resource claims of a pod spec: podspec.py.
- pkg/apis/scheduling/validation/validation.go: PriorityClass value and preemptionPolicy immutable.
- pkg/apis/batch/validation/validation.go: validateJobSpec (restartPolicy, Indexed completion mode),
  ValidateJobSpecUpdate (immutable fields); pkg/apis/batch/v1/defaults.go: SetDefaults_Job.
"""

from __future__ import annotations

from ..quantity import canonical, parse_quantity
from . import core_specs as specs
from . import fields as f
from . import podspec

POD_KEY, JOB_KEY = ("", "Pod"), ("batch", "Job")
_WORKLOADS = {("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet")}
_STANDARD_CONTAINER = {"cpu", "memory", "ephemeral-storage"}
_STANDARD_QUOTA = {"pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
                   "persistentvolumeclaims", "services.nodeports", "services.loadbalancers", "cpu", "memory",
                   "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
                   "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage"}
_STANDARD_RESOURCES = _STANDARD_QUOTA | {"storage"}
_LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
_SVC_NAME_MSG = "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"


def _hugepages(name: str) -> bool:
    return name.split(".", 1)[-1].startswith("hugepages-")


def _overcommit_allowed(name: str) -> bool:
    """IsOvercommitAllowed: a native resource (no domain, or kubernetes.io's) other than hugepages."""
    prefix = name.split("/", 1)[0] if "/" in name else ""
    native = not prefix or prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io")
    return native and not _hugepages(name)


def is_extended_resource(name: str) -> bool:
    """IsExtendedResourceName: outside the kubernetes.io domain and not a quota `requests.` name."""
    if "/" not in name or name.startswith("requests."):
        return False
    prefix = name.split("/", 1)[0]
    return not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"))


def _resource_name_causes(name: str, field: str, standard: set[str], message: str) -> list[dict]:
    """validateResourceName (a qualified name, else a standard resource type), then the kind's own list, which
    is checked even of a name that is not qualified."""
    causes = [f.invalid(field, name, m) for m in f.is_qualified_name(name)]
    if not causes and "/" not in name and name not in _STANDARD_RESOURCES and not _hugepages(name):
        causes.append(f.invalid(field, name, "must be a standard resource type or fully qualified"))
    if "/" not in name and name not in standard and not _hugepages(name):
        causes.append(f.invalid(field, name, message))
    return causes


# Pod templates -------------------------------------------------------------------------------------------------

def _port_name_causes(name: str, field: str) -> list[dict]:
    """IsValidPortName (IANA_SVC_NAME)."""
    causes = []
    if len(name) > 15:
        causes.append(f.invalid(field, name, "must be no more than 15 characters"))
    if not all(c.islower() or c.isdigit() or c == "-" for c in name):
        causes.append(f.invalid(field, name, _SVC_NAME_MSG))
    if not any(c.isalpha() for c in name):
        causes.append(f.invalid(field, name, "must contain at least one letter (a-z)"))
    if "--" in name:
        causes.append(f.invalid(field, name, "must not contain consecutive hyphens"))
    if name.startswith("-") or name.endswith("-"):
        causes.append(f.invalid(field, name, "must not begin or end with a hyphen"))
    return causes


def _resources_causes(resources: dict, field: str) -> list[dict]:
    causes = []
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    for part, values in (("limits", limits), ("requests", requests)):
        for name in values:
            path = f"{field}.{part}[{name}]"
            if "/" not in name:
                if name not in _STANDARD_CONTAINER and not _hugepages(name):
                    causes.extend(_resource_name_causes(name, path, _STANDARD_CONTAINER,
                                                        "must be a standard resource for containers"))
            elif not (name.split("/")[0].endswith("kubernetes.io")) and not is_extended_resource(name):
                causes.append(f.invalid(path, name, "doesn't follow extended resource name standard"))
    for name, value in requests.items():
        path = f"{field}.requests[{name}]"
        try:
            request = parse_quantity(value)
            limit = parse_quantity(limits[name]) if name in limits else None
        except (ValueError, TypeError):
            continue  # reported by the quantity check
        # Both comparisons are reported at the requests map, with the quantities as Quantity.String() writes them.
        shown, bound = canonical(value), canonical(limits[name]) if limit is not None else ""
        if not _overcommit_allowed(name):
            if limit is None:
                causes.append(f.required(f"{field}.limits", "Limit must be set for non overcommitable resources"))
            elif request != limit:
                causes.append(f.invalid(f"{field}.requests", shown, f"must be equal to {name} limit of {bound}"))
        elif limit is not None and request > limit:
            causes.append(f.invalid(f"{field}.requests", shown, f"must be less than or equal to {name} limit of "
                                                                 f"{bound}"))
    return causes


def _containers_causes(containers, field: str, names: set, volumes: set) -> list[dict]:
    causes = []
    for i, ctr in enumerate(containers or ()):
        if not isinstance(ctr, dict):
            continue
        path = f"{field}[{i}]"
        name = ctr.get("name") or ""
        if name:
            causes.extend(f.invalid(f"{path}.name", name, m) for m in f.is_dns1123_label(name))
            if name in names:
                causes.append(f.duplicate(f"{path}.name", name))
            names.add(name)
        port_names = set()
        for j, port in enumerate(ctr.get("ports") or ()):
            if not isinstance(port, dict):
                continue
            number = port.get("containerPort")
            if isinstance(number, int) and not 1 <= number <= 65535:
                causes.append(f.invalid(f"{path}.ports[{j}].containerPort", number,
                                        "must be between 1 and 65535, inclusive"))
            if port.get("name"):
                causes.extend(_port_name_causes(port["name"], f"{path}.ports[{j}].name"))
                if port["name"] in port_names:
                    causes.append(f.duplicate(f"{path}.ports[{j}].name", port["name"]))
                port_names.add(port["name"])
        for j, env in enumerate(ctr.get("env") or ()):
            if not isinstance(env, dict):
                continue
            env_name = env.get("name")
            if not env_name:
                causes.append(f.required(f"{path}.env[{j}].name"))
            else:
                causes.extend(f.invalid(f"{path}.env[{j}].name", env_name, m)
                              for m in f.is_relaxed_env_var_name(env_name))
            if env.get("value") and env.get("valueFrom"):
                causes.append(f.invalid(f"{path}.env[{j}].valueFrom", "",
                                        "may not be specified when `value` is not empty"))
        if isinstance(ctr.get("resources"), dict):
            causes.extend(_resources_causes(ctr["resources"], f"{path}.resources"))
        causes.extend(podspec.volume_mounts_causes(ctr.get("volumeMounts"), f"{path}.volumeMounts", volumes))
    return causes


def pod_spec_causes(spec, field: str, restart_policies=specs.POD_RESTART_POLICIES) -> list[dict]:
    if not isinstance(spec, dict):
        return []
    names: set = set()
    causes, volumes = podspec.volumes_causes(spec.get("volumes"), f"{field}.volumes")
    causes += specs.containers_required_causes(spec, field)
    causes += _containers_causes(spec.get("containers"), f"{field}.containers", names, volumes)
    causes += _containers_causes(spec.get("initContainers"), f"{field}.initContainers", names, volumes)
    causes += specs.restart_policy_causes(spec.get("restartPolicy"), f"{field}.restartPolicy", restart_policies)
    causes += podspec.node_selector_causes(spec.get("nodeSelector"), f"{field}.nodeSelector")
    causes += podspec.affinity_causes(spec.get("affinity"), f"{field}.affinity")
    causes += podspec.tolerations_causes(spec.get("tolerations"), f"{field}.tolerations")
    causes += podspec.resource_claims_causes(spec, field)
    return causes


def default_pod_spec(spec) -> None:
    """SetDefaults_PodSpec / SetDefaults_Container / SetDefaults_ContainerPort (the fields a reader sees)."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        for ctr in spec.get(key) or ():
            if not isinstance(ctr, dict):
                continue
            image = ctr.get("image") or ""
            tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
            ctr.setdefault("imagePullPolicy", "IfNotPresent" if tagged or "@" in image else "Always")
            ctr.setdefault("terminationMessagePath", "/dev/termination-log")
            ctr.setdefault("terminationMessagePolicy", "File")
            for port in ctr.get("ports") or ():
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
            for env in ctr.get("env") or ():  # SetDefaults_ObjectFieldSelector
                ref = (env.get("valueFrom") or {}).get("fieldRef") if isinstance(env, dict) else None
                if isinstance(ref, dict):
                    ref.setdefault("apiVersion", "v1")


def _template_spec(obj: dict, *path: str):
    node = obj
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node


# Kinds ---------------------------------------------------------------------------------------------------------

def _job_causes(obj: dict, old: dict | None) -> list[dict]:
    spec = obj.get("spec") or {}
    causes = specs.job_spec_causes(spec)
    # ValidatePodTemplateSpec: the template's labels (generateSelector's among them: the Job's name).
    causes += specs.labels_causes(((spec.get("template") or {}).get("metadata") or {}).get("labels"),
                                  "spec.template.labels")
    causes += pod_spec_causes(_template_spec(obj, "spec", "template", "spec"), "spec.template.spec",
                              specs.JOB_RESTART_POLICIES)
    indexed = spec.get("completionMode") == "Indexed"
    if indexed:
        if spec.get("completions") is None:
            causes.append(f.required("spec.completions", "when completion mode is Indexed"))
        if isinstance(spec.get("parallelism"), int) and spec["parallelism"] > 100000:
            causes.append(f.invalid("spec.parallelism", spec["parallelism"],
                                    "must be less than or equal to 100000 when completion mode is Indexed"))
        if isinstance(spec.get("maxFailedIndexes"), int) and isinstance(spec.get("completions"), int) \
                and spec["maxFailedIndexes"] > spec["completions"]:
            causes.append(f.invalid("spec.maxFailedIndexes", spec["maxFailedIndexes"],
                                    "must be less than or equal to completions"))
    elif spec.get("backoffLimitPerIndex") is not None:
        causes.append(f.invalid("spec.backoffLimitPerIndex", spec["backoffLimitPerIndex"],
                                "requires indexed completion mode"))
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        causes.append(f.required("spec.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    if old is not None:
        old_spec = old.get("spec") or {}
        for key in ("completionMode", "selector", "podFailurePolicy"):
            if old_spec.get(key) != spec.get(key) and key in old_spec:
                causes.append(f.invalid(f"spec.{key}", spec.get(key), "field is immutable"))
        # A suspended job's template may still change (JobMutableNodeSchedulingDirectives); a started one's not.
        if not old_spec.get("suspend") and old_spec.get("template") != spec.get("template"):
            causes.append(f.invalid("spec.template", spec.get("template"), "field is immutable"))
    return causes


def default_job(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    spec.setdefault("manualSelector", False)
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    labels = (template.get("metadata") or {}).get("labels")
    if labels and not obj["metadata"].get("labels"):
        obj["metadata"]["labels"] = dict(labels)
    default_pod_spec(template.get("spec"))


def _namespace_causes(obj: dict) -> list[dict]:
    """ValidateNamespace: each of spec.finalizers a qualified name, and a standard one when it has no domain."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    finalizers = [v for v in spec.get("finalizers") or () if isinstance(v, str)]
    causes = []
    for value in finalizers:
        causes += [f.invalid("spec.finalizers", value, m) for m in f.is_qualified_name(value)]
        if "/" not in value and value not in f.STANDARD_FINALIZERS:
            causes.append(f.invalid("spec.finalizers", value, "name is neither a standard finalizer name nor is it "
                                                              "fully qualified"))
    return causes


def _quota_causes(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    causes = []
    for name in spec.get("hard") or {}:
        causes.extend(_resource_name_causes(name, f"spec.hard[{name}]", _STANDARD_QUOTA,
                                            "must be a standard resource for quota"))
    return causes + specs.quota_scope_causes(spec, _STANDARD_QUOTA)


def default_limit_range(obj: dict) -> None:
    """SetDefaults_LimitRangeItem: a Container limit's default is its max, its default request the default, else
    the min (which is how a GPU LimitRange with only `max` hands every container that many GPUs)."""
    for item in (obj.get("spec") or {}).get("limits") or ():
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = item.setdefault("default", {})
        request = item.setdefault("defaultRequest", {})
        for key, value in (item.get("max") or {}).items():
            default.setdefault(key, value)
        for key, value in default.items():
            request.setdefault(key, value)
        for key, value in (item.get("min") or {}).items():
            request.setdefault(key, value)
        if not default:
            del item["default"]
        if not request:
            del item["defaultRequest"]


def _q(values: dict, key: str):
    try:
        return parse_quantity(values[key]) if key in values else None
    except (ValueError, TypeError):
        return None


def _text(values: dict, key: str) -> str:
    """The quantity as Quantity.String() writes it (what upstream's messages show)."""
    try:
        return canonical(values[key])
    except (ValueError, TypeError):
        return str(values[key])


def _limit_causes(path: str, lo: dict, hi: dict, default: dict, request: dict) -> list[dict]:
    """validateLimitRange's comparisons, in its order; note upstream shows the min (or max) as the bad value of a
    default below the min (or above the max)."""
    causes = []
    for key in sorted(set(lo) | set(hi) | set(default) | set(request)):
        mn, mx, df, dr = _q(lo, key), _q(hi, key), _q(default, key), _q(request, key)
        tmn, tmx = (_text(lo, key) if mn is not None else ""), (_text(hi, key) if mx is not None else "")
        tdf, tdr = (_text(default, key) if df is not None else ""), (_text(request, key) if dr is not None else "")
        checks = [
            (mn is not None and mx is not None and mn > mx, "min", tmn,
             f"min value {tmn} is greater than max value {tmx}"),
            (dr is not None and mn is not None and mn > dr, "defaultRequest", tdr,
             f"min value {tmn} is greater than default request value {tdr}"),
            (dr is not None and mx is not None and dr > mx, "defaultRequest", tdr,
             f"default request value {tdr} is greater than max value {tmx}"),
            (dr is not None and df is not None and dr > df, "defaultRequest", tdr,
             f"default request value {tdr} is greater than default limit value {tdf}"),
            (df is not None and mn is not None and mn > df, "default", tmn,
             f"min value {tmn} is greater than default value {tdf}"),
            (df is not None and mx is not None and df > mx, "default", tmx,
             f"default value {tdf} is greater than max value {tmx}"),
            (not _overcommit_allowed(key) and df is not None and dr is not None and df != dr, "defaultRequest", tdr,
             f"default value {tdf} must equal to defaultRequest value {tdr} in {key}"),
        ]
        causes += [f.invalid(f"{path}.{part}[{key}]", value, detail)
                   for failed, part, value, detail in checks if failed]
    return causes


def _limit_range_causes(obj: dict) -> list[dict]:
    causes, seen = [], set()
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or ()):
        if not isinstance(item, dict):
            continue
        path, kind = f"spec.limits[{i}]", item.get("type") or ""
        if kind in seen:
            causes.append(f.duplicate(f"{path}.type", kind))
        seen.add(kind)
        if "/" not in kind and kind not in _LIMIT_TYPES:
            causes.append(f.invalid(f"{path}.type", kind, "must be a standard limit type or fully qualified"))
        if kind == "Pod":
            for part in ("default", "defaultRequest"):
                if item.get(part):
                    causes.append(f.forbidden(f"{path}.{part}", "may not be specified when `type` is 'Pod'"))
        lo, hi = item.get("min") or {}, item.get("max") or {}
        default, request = item.get("default") or {}, item.get("defaultRequest") or {}
        causes += _limit_causes(path, lo, hi, default, request)
        for key in (item.get("maxLimitRequestRatio") or {}):
            ratio = _q(item["maxLimitRequestRatio"], key)
            if ratio is not None and ratio < 1:
                text = _text(item["maxLimitRequestRatio"], key)
                causes.append(f.invalid(f"{path}.maxLimitRequestRatio[{key}]", text, f"ratio {text} is less than 1"))
    return causes


def default_pod(pod: dict) -> None:
    """SetDefaults_Pod: a container stating limits but not requests requests its limits (before LimitRanger); service
    links on."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    for key in ("containers", "initContainers"):
        for ctr in spec.get(key) or ():
            resources = ctr.get("resources") if isinstance(ctr, dict) else None
            if isinstance(resources, dict) and resources.get("limits"):
                requests = resources.setdefault("requests", {})
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)
    spec.setdefault("enableServiceLinks", True)
    default_pod_spec(spec)


def _priority_class_causes(obj: dict, old: dict | None) -> list[dict]:
    """pkg/apis/scheduling/validation/validation.go ValidatePriorityClass(Update)."""
    causes = []
    name, value = obj["metadata"].get("name", ""), obj.get("value")
    if name.startswith("system-"):
        if name not in ("system-cluster-critical", "system-node-critical"):
            causes.append(f.forbidden("metadata.name", "priority class names with 'system-' prefix are reserved for "
                                                       f"system use only. error: {name} is not a known system "
                                                       "priority class"))
    elif isinstance(value, int) and value > 1000000000:
        causes.append(f.forbidden("value", "maximum allowed value of a user defined priority is 1000000000"))
    if old is not None:
        if old.get("value") != value:
            causes.append(f.forbidden("value", "may not be changed in an update."))
        if old.get("preemptionPolicy") != obj.get("preemptionPolicy"):
            causes.append(f.invalid("preemptionPolicy", obj.get("preemptionPolicy"), "field is immutable"))
    return causes


def mutate(op: str, key: tuple, obj: dict) -> None:
    """Registry defaulting (runs on every write, as decoding does)."""
    if key == POD_KEY:
        default_pod(obj)
    elif key == JOB_KEY:
        default_job(obj)
    elif key in _WORKLOADS:
        default_pod_spec(_template_spec(obj, "spec", "template", "spec"))
    elif key == ("batch", "CronJob"):
        default_pod_spec(_template_spec(obj, "spec", "jobTemplate", "spec", "template", "spec"))
    elif key == ("", "LimitRange"):
        default_limit_range(obj)


def causes(op: str, key: tuple, obj: dict, old: dict | None) -> list[dict]:
    if key == POD_KEY:
        return pod_spec_causes(obj.get("spec"), "spec")
    if key == JOB_KEY:
        return _job_causes(obj, old)
    if key in _WORKLOADS:
        return pod_spec_causes(_template_spec(obj, "spec", "template", "spec"), "spec.template.spec",
                               ("Always",))
    if key == ("batch", "CronJob"):
        return pod_spec_causes(_template_spec(obj, "spec", "jobTemplate", "spec", "template", "spec"),
                               "spec.jobTemplate.spec.template.spec", specs.JOB_RESTART_POLICIES)
    if key == ("", "ResourceQuota"):
        return _quota_causes(obj)
    if key == ("", "Namespace"):
        return _namespace_causes(obj)
    if key == ("", "LimitRange"):
        return _limit_range_causes(obj)
    if key == ("scheduling.k8s.io", "PriorityClass"):
        return specs.priority_class_policy_causes(obj) + _priority_class_causes(obj, old)
    return _OTHER_SPECS[key](obj) if key in _OTHER_SPECS else []


_OTHER_SPECS = {("", "Service"): specs.service_causes, ("", "ConfigMap"): specs.config_map_causes,
                ("rbac.authorization.k8s.io", "RoleBinding"): specs.role_binding_causes,
                ("rbac.authorization.k8s.io", "ClusterRoleBinding"): specs.role_binding_causes,
                ("networking.k8s.io", "NetworkPolicy"): specs.network_policy_causes,
                ("resource.k8s.io", "ResourceClaimTemplate"): specs.device_request_causes}
