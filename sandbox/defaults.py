"""What the API server sets on built-in kinds when they are written, in its two steps.

`apply`: the defaults of decoding (kubernetes pkg/apis/*/v1/defaults.go): the namespace's name label,
a Secret's stringData merged into data (conversion), a Service's type, session affinity, internal traffic policy
and ports' protocol/targetPort, a PriorityClass's preemption policy, a binding's role and subject API groups, a
device request's allocation mode and count. They are what a write's field manager owns (`sandbox.managed_update`).

`prepare_for_create`: what each kind's registry strategy sets on create (pkg/registry/*/strategy.go
PrepareForCreate), after the uid is assigned: the namespace's `kubernetes` finalizer and phase, a new Pod's phase,
a Service's cluster IP (from a made-up 10.96.0.0/16 range) and IP families, a LimitRange's name when it has none
(a uuid), a Job's generated selector and the template labels that match it (then, as the object is decoded again
on its way to storage, the template's labels become the Job's when it has none)."""

from __future__ import annotations

import base64
import uuid

_NAMESPACE_KEY = ("", "Namespace")
_SERVICE_KEY = ("", "Service")
_RBAC = "rbac.authorization.k8s.io"
_JOB_KEY = ("batch", "Job")
# pkg/apis/batch/types.go: the legacy and the prefixed label of each pair.
_JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
_CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


def _device_requests(obj: dict) -> list:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if obj.get("kind") == "ResourceClaimTemplate":
        spec = spec.get("spec") if isinstance(spec.get("spec"), dict) else {}
    devices = spec.get("devices") if isinstance(spec.get("devices"), dict) else {}
    requests = devices.get("requests")
    return [r for r in requests if isinstance(r, dict)] if isinstance(requests, list) else []


class BuiltinDefaults:
    """Holds the cluster-IP allocator's position, so each Service gets its own address."""

    def __init__(self):
        self._service_ips = 0

    def apply(self, kind_key: tuple[str, str], obj: dict, creating: bool) -> None:
        meta = obj["metadata"]
        if kind_key == _NAMESPACE_KEY:
            if meta.get("name"):
                meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        elif kind_key == ("", "Secret"):
            string_data = obj.pop("stringData", None) or {}
            data = obj.setdefault("data", {}) if string_data else obj.get("data")
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            obj.setdefault("type", "Opaque")
        elif kind_key == _SERVICE_KEY:
            self._service(obj.setdefault("spec", {}), creating)
        elif kind_key == ("scheduling.k8s.io", "PriorityClass"):
            obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
        elif kind_key == _JOB_KEY:
            self._job_labels(obj)
        elif kind_key[0] == _RBAC and kind_key[1] in ("RoleBinding", "ClusterRoleBinding"):
            self._binding(obj)
        elif kind_key[0] == "resource.k8s.io" and kind_key[1] in ("ResourceClaim", "ResourceClaimTemplate"):
            for request in _device_requests(obj):  # SetDefaults_ExactDeviceRequest
                exactly = request.get("exactly")
                if isinstance(exactly, dict):
                    exactly.setdefault("allocationMode", "ExactCount")
                    if exactly["allocationMode"] == "ExactCount" and not exactly.get("count"):
                        exactly["count"] = 1  # 0 is the Go zero value: unset

    @staticmethod
    def _binding(obj: dict) -> None:
        """SetDefaults_RoleBinding and SetDefaults_Subject (pkg/apis/rbac/v1/defaults.go)."""
        if isinstance(obj.get("roleRef"), dict) and not obj["roleRef"].get("apiGroup"):
            obj["roleRef"]["apiGroup"] = _RBAC
        for subject in obj.get("subjects") or ():
            if isinstance(subject, dict) and not subject.get("apiGroup"):
                if subject.get("kind") in ("User", "Group"):
                    subject["apiGroup"] = _RBAC
                elif subject.get("kind") == "ServiceAccount":
                    subject["apiGroup"] = ""

    def _service(self, spec: dict, creating: bool) -> None:
        """SetDefaults_Service; on update the cluster IPs kept from before."""
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] in ("ClusterIP", "NodePort", "LoadBalancer"):
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
        if not creating and spec.get("clusterIP"):
            spec.setdefault("clusterIPs", [spec["clusterIP"]])

    def prepare_for_create(self, kind_key: tuple[str, str], obj: dict) -> None:
        meta = obj["metadata"]
        if kind_key == _NAMESPACE_KEY:
            # A generated name gets its label when the object is decoded again on its way to storage.
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
        elif kind_key == ("", "Pod"):
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif kind_key == ("", "LimitRange") and not meta.get("name"):
            meta["name"] = str(uuid.uuid4())
        elif kind_key == _SERVICE_KEY:
            self._allocate(obj.setdefault("spec", {}))
        elif kind_key == _JOB_KEY:
            self._job_selector(obj)

    def _allocate(self, spec: dict) -> None:
        """The ClusterIP allocator (one address per Service) and the single-stack IPv4 families of this cluster."""
        if spec.get("type", "ClusterIP") != "ExternalName":
            if not spec.get("clusterIP"):
                self._service_ips += 1
                spec["clusterIP"] = f"10.96.{self._service_ips // 254}.{self._service_ips % 254 + 1}"
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        if spec.get("clusterIP"):
            spec.setdefault("clusterIPs", [spec["clusterIP"]])

    @staticmethod
    def _job_selector(obj: dict) -> None:
        """generateSelector (pkg/registry/batch/job/strategy.go), unless the Job chose its selector."""
        spec, meta = obj.setdefault("spec", {}), obj["metadata"]
        if spec.get("manualSelector") is True:
            return
        template = spec.setdefault("template", {})
        template_meta = template.setdefault("metadata", {})
        labels = template_meta.setdefault("labels", {})
        for label in _JOB_NAME_LABELS:
            labels.setdefault(label, meta.get("name", ""))
        for label in _CONTROLLER_UID_LABELS:
            labels.setdefault(label, meta["uid"])
        selector = spec.setdefault("selector", {})
        selector.setdefault("matchLabels", {}).setdefault(_CONTROLLER_UID_LABELS[1], meta["uid"])

    @staticmethod
    def _job_labels(obj: dict) -> None:
        """SetDefaults_Job: a Job without labels takes its pod template's."""
        meta = obj["metadata"]
        labels = ((obj.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels")
        if not meta.get("labels") and labels:
            meta["labels"] = dict(labels)

    def read_back(self, kind_key: tuple[str, str], obj: dict) -> None:
        """The decoding defaults again, as the object a create answers is read back from storage after validation:
        a Job created without labels gets its template's, by then with the labels `generateSelector` added."""
        if kind_key == _JOB_KEY:
            self._job_labels(obj)
