"""The resource registry: built-in Kubernetes kinds, kinds loaded from CRD files, and discovery documents."""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(eq=False)
class ResourceType:
    """One kind as the API serves it; objects of every served version share one storage slot."""

    group: str
    kind: str
    plural: str
    namespaced: bool
    versions: tuple[str, ...]  # served versions, preferred first
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "log"
    name_rule: str = "subdomain"  # "subdomain" | "label" | "dns1035" | "path"
    crd_schemas: dict = field(default_factory=dict)  # version -> openAPIV3Schema, only for custom kinds
    categories: tuple[str, ...] = ()
    builtin: bool = True  # False for custom kinds
    printer_columns: dict = field(default_factory=dict)  # version -> additionalPrinterColumns (custom kinds)
    selectable_fields: dict = field(default_factory=dict)  # version -> field paths a selector may name (CRDs)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.kind)

    @property
    def has_generation(self) -> bool:
        """Custom resources and the built-in kinds whose registry strategy sets metadata.generation."""
        return not self.builtin or self.key in _GENERATION_KINDS or self.key in _CREATE_GENERATION_KINDS

    @property
    def bumps_generation(self) -> bool:
        return self.has_generation and self.key not in _CREATE_GENERATION_KINDS

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def verbs(self) -> list[str]:
        if self.plural == "namespaces":
            return [v for v in ALL_VERBS if v != "deletecollection"]
        return list(ALL_VERBS)

    def api_version(self, version: str | None = None) -> str:
        version = version or self.versions[0]
        return f"{self.group}/{version}" if self.group else version


def _core(group, version, kind, plural, namespaced=True, short=(), sub=(), name_rule="subdomain", categories=()):
    return ResourceType(group, kind, plural, namespaced, (version,), tuple(short), tuple(sub), name_rule,
                        categories=tuple(categories))


_ALL = ("all",)
# pkg/registry/*/strategy.go PrepareForCreate: the kinds with a spec the controllers observe set a generation (Pods
# too since 1.34's PodObservedGenerationTracking);
# ConfigMaps, Secrets, Namespaces, Services, quotas, RBAC and the like have none.
_GENERATION_KINDS = {("", "Pod"), ("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
                     ("batch", "Job"), ("batch", "CronJob"), ("networking.k8s.io", "NetworkPolicy"),
                     ("networking.k8s.io", "Ingress"),
                     ("policy", "PodDisruptionBudget"), ("resource.k8s.io", "DeviceClass"),
                     ("resource.k8s.io", "ResourceSlice"), ("apiextensions.k8s.io", "CustomResourceDefinition")}
# PriorityClass's strategy sets generation 1 on create and never bumps it (its value is immutable anyway).
_CREATE_GENERATION_KINDS = {("scheduling.k8s.io", "PriorityClass")}
CORE_KINDS = (
    _core("", "v1", "Namespace", "namespaces", False, ["ns"], ["status"], "label"),
    _core("", "v1", "ResourceQuota", "resourcequotas", short=["quota"], sub=["status"]),
    _core("", "v1", "LimitRange", "limitranges", short=["limits"]),
    _core("", "v1", "ServiceAccount", "serviceaccounts", short=["sa"]),
    _core("", "v1", "ConfigMap", "configmaps", short=["cm"]),
    _core("", "v1", "Secret", "secrets"),
    _core("", "v1", "Service", "services", short=["svc"], sub=["status"], name_rule="dns1035", categories=_ALL),
    _core("", "v1", "Pod", "pods", short=["po"], sub=["status", "log"], categories=_ALL),
    _core("", "v1", "Event", "events", short=["ev"]),
    _core("", "v1", "Node", "nodes", False, ["no"], ["status"]),
    _core("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", short=["pvc"], sub=["status"]),
    _core("rbac.authorization.k8s.io", "v1", "Role", "roles", name_rule="path"),
    _core("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", name_rule="path"),
    _core("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False, name_rule="path"),
    _core("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False, name_rule="path"),
    _core("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", short=["netpol"]),
    _core("networking.k8s.io", "v1", "Ingress", "ingresses", short=["ing"], sub=["status"]),
    _core("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short=["pdb"], sub=["status"]),
    _core("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ["pc"]),
    _core("batch", "v1", "Job", "jobs", sub=["status"], categories=_ALL),
    # Dynamic Resource Allocation, GA in Kubernetes 1.34 (staging/src/k8s.io/api/resource/v1/types.go).
    _core("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    _core("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
    _core("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", sub=["status"]),
    _core("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates"),
    _core("batch", "v1", "CronJob", "cronjobs", short=["cj"], sub=["status"], categories=_ALL),
    _core("apps", "v1", "Deployment", "deployments", short=["deploy"], sub=["status"], categories=_ALL),
    _core("apps", "v1", "StatefulSet", "statefulsets", short=["sts"], sub=["status"], categories=_ALL),
    _core("apps", "v1", "DaemonSet", "daemonsets", short=["ds"], sub=["status"], categories=_ALL),
    _core("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False,
          ["crd", "crds"], ["status"]),
)

# The custom kinds the portal emits; without upstream CRDs they are registered with permissive schemas.
BUILTIN_CUSTOM_KINDS = (
    ("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues", False, ["cq"]),
    ("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues", True, ["queue", "queues"]),
    ("kueue.x-k8s.io", "v1beta2", "ResourceFlavor", "resourceflavors", False, ["flavor", "flavors"]),
    ("kueue.x-k8s.io", "v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses", False, []),
    ("kueue.x-k8s.io", "v1beta2", "Cohort", "cohorts", False, []),
    ("kueue.x-k8s.io", "v1beta2", "Workload", "workloads", True, ["wl"]),
    ("kueue.x-k8s.io", "v1beta2", "Topology", "topologies", False, []),
    ("kueue.x-k8s.io", "v1beta2", "AdmissionCheck", "admissionchecks", False, []),
    ("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes", False, ["hn"]),
    ("scheduling.volcano.sh", "v1beta1", "Queue", "queues", False, ["q", "queue-v1beta1"]),
    ("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups", True, ["pg", "podgroup-v1beta1"]),
    ("batch.volcano.sh", "v1alpha1", "Job", "jobs", True, ["vcjob", "vj"]),
    ("ray.io", "v1", "RayJob", "rayjobs", True, []),
    ("ray.io", "v1", "RayCluster", "rayclusters", True, []),
)
_PERMISSIVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def builtin_custom_kinds() -> list[ResourceType]:
    return [ResourceType(g, kind, plural, namespaced, (v,), tuple(short), ("status",), builtin=False,
                         crd_schemas={v: _PERMISSIVE})
            for g, v, kind, plural, namespaced, short in BUILTIN_CUSTOM_KINDS]


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple:
    """Kubernetes' version ordering: GA > beta > alpha, then by number; anything else last, alphabetically."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0), "")


def resource_type_from_crd(crd: dict) -> ResourceType:
    """A `ResourceType` from an apiextensions.k8s.io/v1 CustomResourceDefinition (served versions only)."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec.get("versions", []) if v.get("served", True)]
    if not served:
        raise ValueError(f"CRD {crd.get('metadata', {}).get('name')} serves no version")
    versions = sorted((v["name"] for v in served), key=version_priority)
    schemas = {v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") or _PERMISSIVE for v in served}
    # The status subresource is declared per version; one storage slot means one answer, so any version wins.
    has_status = any("status" in (v.get("subresources") or {}) for v in served)
    return ResourceType(spec["group"], names["kind"], names["plural"], spec.get("scope") == "Namespaced",
                        tuple(versions), tuple(names.get("shortNames") or ()), ("status",) if has_status else (),
                        crd_schemas=schemas, categories=tuple(names.get("categories") or ()), builtin=False,
                        printer_columns={v["name"]: v.get("additionalPrinterColumns") or [] for v in served},
                        selectable_fields={v["name"]: tuple(f["jsonPath"].lstrip(".")
                                                            for f in v.get("selectableFields") or ())
                                           for v in served})


_crd_cache: dict[tuple, list[ResourceType]] = {}
_crd_cache_lock = threading.Lock()


def load_crd_dir(directory: str | os.PathLike) -> list[ResourceType]:
    """Every CRD in `*.yaml` under `directory` (recursively; multi-document files allowed).

    Parsed once per process and file modification time: large CRDs take long to parse, and tests start many sandboxes.
    """
    files = sorted(p for p in Path(directory).rglob("*.y*ml") if p.is_file())
    key = tuple((str(p), p.stat().st_mtime_ns) for p in files)
    with _crd_cache_lock:
        if key not in _crd_cache:
            types = []
            for path in files:
                for doc in yaml.load_all(path.read_text(), Loader=_YAML_LOADER):
                    if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                        types.append(resource_type_from_crd(doc))
            _crd_cache[key] = types
        return list(_crd_cache[key])


class Registry:
    """Lookup of resource types by URL path and by kind, plus the discovery documents built from them."""

    def __init__(self, types=()):
        self._lock = threading.Lock()
        self.by_key: dict[tuple[str, str], ResourceType] = {}
        self.by_path: dict[tuple[str, str, str], ResourceType] = {}
        for rt in types:
            self.add(rt)

    @classmethod
    def build(cls, crd_dirs=(), builtin_custom_kinds_: bool | None = None) -> Registry:
        registry = cls(CORE_KINDS)
        for directory in crd_dirs:
            for rt in load_crd_dir(directory):
                registry.add(rt)
        if builtin_custom_kinds_ is None:
            builtin_custom_kinds_ = not crd_dirs
        if builtin_custom_kinds_:
            for rt in builtin_custom_kinds():
                if rt.key not in registry.by_key:
                    registry.add(rt)
        return registry

    def add(self, rt: ResourceType) -> None:
        with self._lock:
            old = self.by_key.get(rt.key)
            if old is not None:
                self._remove(old)
            self.by_key[rt.key] = rt
            for version in rt.versions:
                self.by_path[(rt.group, version, rt.plural)] = rt

    def remove(self, group: str, kind: str) -> None:
        with self._lock:
            rt = self.by_key.get((group, kind))
            if rt is not None:
                self._remove(rt)

    def _remove(self, rt: ResourceType) -> None:
        self.by_key.pop(rt.key, None)
        for version in rt.versions:
            self.by_path.pop((rt.group, version, rt.plural), None)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.by_path.get((group, version, plural))

    def for_object(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        rt = self.by_key.get((group, kind))
        return rt if rt is not None and version in rt.versions else None

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions, preferred first (core group "" included)."""
        groups: dict[str, set[str]] = {}
        for rt in list(self.by_key.values()):
            groups.setdefault(rt.group, set()).update(rt.versions)
        return {g: sorted(vs, key=version_priority) for g, vs in groups.items()}

    # Discovery documents (the legacy, unaggregated form the official client's DynamicClient reads).

    def api_versions(self) -> dict:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}

    def api_group(self, group: str) -> dict | None:
        versions = self.group_versions().get(group)
        if not versions or not group:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries,
                "preferredVersion": entries[0]}

    def api_group_list(self) -> dict:
        groups = [self.api_group(g) for g in sorted(self.group_versions()) if g]
        for g in groups:
            del g["kind"], g["apiVersion"]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_resource_list(self, group: str, version: str) -> dict | None:
        resources = []
        for rt in sorted(self.by_key.values(), key=lambda r: r.plural):
            if rt.group != group or version not in rt.versions:
                continue
            entry = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                     "kind": rt.kind, "verbs": rt.verbs}
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            for sub in rt.subresources:
                verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
                resources.append({"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                                  "kind": rt.kind, "verbs": verbs})
        if not resources:
            return None
        group_version = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
