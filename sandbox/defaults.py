"""Defaults the API server sets on built-in kinds when they are written (the namespace's name label and finalizer,
a new Pod's phase, a Secret's stringData, a Service's type, ports and cluster IP).

Where kubernetes v1.33 does each: pkg/apis/core/v1/defaults.go (SetDefaults_Namespace's
`kubernetes.io/metadata.name` label, SetDefaults_Service's type and port protocol/targetPort),
pkg/registry/core/namespace/strategy.go (PrepareForCreate: the `kubernetes` finalizer),
pkg/registry/core/pod/strategy.go (PrepareForCreate: phase Pending), pkg/apis/core/v1/conversion.go
(Convert_v1_Secret_To_core_Secret: stringData merged into data) and pkg/registry/core/service/ipallocator (a
ClusterIP from the service CIDR)."""

from __future__ import annotations

import base64

_NAMESPACE_KEY = ("", "Namespace")


class BuiltinDefaults:
    """Holds the cluster-IP allocator's position, so each Service gets its own address."""

    def __init__(self):
        self._service_ips = 0

    def apply(self, kind_key: tuple[str, str], obj: dict, creating: bool) -> None:
        meta = obj["metadata"]
        if kind_key == _NAMESPACE_KEY:
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            if creating:
                obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
                obj["status"] = {"phase": "Active"}
        elif kind_key == ("", "Pod") and creating:
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif kind_key == ("", "Secret"):
            string_data = obj.pop("stringData", None) or {}
            data = obj.setdefault("data", {}) if string_data else obj.get("data")
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            obj.setdefault("type", "Opaque")
        elif kind_key == ("", "Service"):
            self._service(obj.setdefault("spec", {}), creating)

    def _service(self, spec: dict, creating: bool) -> None:
        """SetDefaults_Service and the ClusterIP allocator (a made-up 10.96.0.0/16 range, one address per Service)."""
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
        if creating and spec["type"] != "ExternalName" and not spec.get("clusterIP"):
            self._service_ips += 1
            spec["clusterIP"] = f"10.96.{self._service_ips // 254}.{self._service_ips % 254 + 1}"
        if spec.get("clusterIP"):
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
