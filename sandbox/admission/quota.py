"""ResourceQuota: the admission plugin that refuses a pod over quota, and the controller that keeps `status`.

- plugin/pkg/admission/resourcequota/controller.go: a new pod whose usage takes any tracked resource over `hard`
  is refused, 403 `pods "<name>" is forbidden: exceeded quota: <quota>, requested: <r>=<n>, used: <r>=<n>, limited:
  <r>=<n>`; with cpu/memory tracked, every container must state them (`failed quota: <quota>: must specify
  limits.cpu for: <containers>`).
- pkg/quota/v1/evaluator/core/pods.go: a pod's usage (`pods`, `count/pods`, requests.* / limits.* of cpu, memory and
  ephemeral-storage, bare cpu/memory as requests, `requests.<extended resource>`), the larger of the containers'
  sum and any init container; pods that Succeeded or Failed use nothing. Other kinds count as `count/<resource>
  [.<group>]` (and configmaps, secrets, services, persistentvolumeclaims, resourcequotas).
- pkg/controller/resourcequota/resource_quota_controller.go: `status.hard` mirrors `spec.hard` and `status.used`
  the namespace's usage, recomputed whenever a pod or a quota changes.
- pkg/quota/v1/evaluator/core/resource_claims.go: a ResourceClaim uses `count/resourceclaims.resource.k8s.io` and,
  per device class, `<class>.deviceclass.resource.k8s.io/devices` (device_counts); a claim
  over quota is refused like a pod, `resourceclaims.resource.k8s.io "<name>" is forbidden: exceeded quota: ...`.
- plugin/pkg/admission/limitranger/admission.go: before quota, a new pod's containers get the namespace's
  LimitRange Container `defaultRequest`/`default` for resources they do not state.
"""

from __future__ import annotations

from decimal import Decimal

from ..errors import ApiError
from ..quantity import parse_quantity
from .core import is_extended_resource

QUOTA_KEY, POD_KEY, LIMIT_RANGE_KEY = ("", "ResourceQuota"), ("", "Pod"), ("", "LimitRange")
CLAIM_KEY = ("resource.k8s.io", "ResourceClaim")
DEVICES_SUFFIX = ".deviceclass.resource.k8s.io/devices"
_LEGACY_COUNTS = {"configmaps": ("", "ConfigMap"), "secrets": ("", "Secret"), "services": ("", "Service"),
                  "persistentvolumeclaims": ("", "PersistentVolumeClaim"), "resourcequotas": ("", "ResourceQuota")}
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_MUST_SPECIFY = {"requests.cpu": ("requests", "cpu"), "cpu": ("requests", "cpu"),
                 "requests.memory": ("requests", "memory"), "memory": ("requests", "memory"),
                 "limits.cpu": ("limits", "cpu"), "limits.memory": ("limits", "memory")}


def _q(value) -> Decimal:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return Decimal(0)


def format_quantity(value: Decimal, like: str = "") -> str:
    """A sum as the API prints it: whole numbers bare (or in the binary unit the limit uses), else milli-units."""
    for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if like.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")) and value and value % (Decimal(2) ** power) == 0:
            return f"{int(value / Decimal(2) ** power)}{suffix}"
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int(value * 1000)}m"


def _container_amounts(ctr: dict) -> dict[str, Decimal]:
    resources = ctr.get("resources") or {}
    out: dict[str, Decimal] = {}
    for part in ("requests", "limits"):
        for name, value in (resources.get(part) or {}).items():
            if name in _COMPUTE:
                out[f"{part}.{name}"] = _q(value)
            elif part == "requests" and is_extended_resource(name):
                out[f"requests.{name}"] = _q(value)
    return out


def pod_usage(pod: dict) -> dict[str, Decimal]:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return {}
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for ctr in spec.get("containers") or ():
        for key, value in _container_amounts(ctr).items():
            total[key] = total.get(key, Decimal(0)) + value
    for ctr in spec.get("initContainers") or ():
        for key, value in _container_amounts(ctr).items():
            total[key] = max(total.get(key, Decimal(0)), value)
    for name in ("cpu", "memory", "ephemeral-storage"):
        if f"requests.{name}" in total:
            total[name] = total[f"requests.{name}"]
    total["pods"] = total["count/pods"] = Decimal(1)
    return total


ALL_DEVICES = 32  # resource.k8s.io/v1 AllocationResultsMaxSize: what an `All` request counts for quota


def device_counts(claim_spec: dict) -> dict[str, int]:
    """Devices a claim may take per class, as ResourceQuota and Kueue count them: an exact count, `All` as the most
    an allocation holds, a firstAvailable request as its largest alternative per class (kubernetes
    pkg/quota/v1/evaluator/core/resource_claims.go)."""
    counts: dict[str, int] = {}
    for request in ((claim_spec.get("devices") or {}).get("requests") or []):
        options = [request["exactly"]] if request.get("exactly") else request.get("firstAvailable") or []
        largest: dict[str, int] = {}
        for option in options:
            amount = ALL_DEVICES if option.get("allocationMode") == "All" else int(option.get("count") or 1)
            largest[option["deviceClassName"]] = max(largest.get(option["deviceClassName"], 0), amount)
        for name, amount in largest.items():
            counts[name] = counts.get(name, 0) + amount
    return counts


def claim_usage(claim: dict) -> dict[str, Decimal]:
    counts = device_counts(claim.get("spec") or {})
    return {f"{name}{DEVICES_SUFFIX}": Decimal(amount) for name, amount in counts.items()}


def _listing(values: dict, names: list[str], hard: dict) -> str:
    """prettyPrint of the admission plugin: sorted `name=quantity` pairs."""
    return ",".join(f"{k}={format_quantity(values.get(k, Decimal(0)), str(hard[k]))}" for k in names)


class QuotaController:
    def __init__(self, store):
        self.store = store

    def _count_key(self, name: str):
        if name in _LEGACY_COUNTS:
            return _LEGACY_COUNTS[name]
        if not name.startswith("count/") or name == "count/pods":
            return None
        plural, _, group = name[len("count/"):].partition(".")
        for rt in self.store.registry.by_key.values():
            if rt.plural == plural and rt.group == group:
                return rt.key
        return None

    def _objects(self, key, namespace: str) -> list[dict]:
        return list(self.store._objects.get(key, {}).get(namespace, {}).values())

    def usage(self, namespace: str, hard: dict) -> dict[str, Decimal]:
        used = {name: Decimal(0) for name in hard}
        pods = self._objects(POD_KEY, namespace)
        for pod in pods:
            for key, value in pod_usage(pod).items():
                if key in used:
                    used[key] += value
        if any(name.endswith(DEVICES_SUFFIX) for name in hard):
            for claim in self._objects(CLAIM_KEY, namespace):
                for key, value in claim_usage(claim).items():
                    if key in used:
                        used[key] += value
        for name in hard:
            key = self._count_key(name)
            if key is not None:
                used[name] = Decimal(len(self._objects(key, namespace)))
        return used

    def sync(self, quota: dict) -> None:
        hard = (quota.get("spec") or {}).get("hard") or {}
        meta = quota["metadata"]
        used = self.usage(meta["namespace"], hard)
        status = {"hard": dict(hard), "used": {k: format_quantity(v, str(hard[k])) for k, v in used.items()}}
        if quota.get("status") != status:
            rt = self.store.registry.by_key[QUOTA_KEY]
            self.store.update(rt, {**quota, "status": status}, meta["namespace"], meta["name"], subresource="status")

    def on_change(self, event: str, obj: dict, store, rt, previous: dict | None = None) -> None:
        """A quota is synced when it is created or its spec.hard changes (the controller's update handler ignores
        status-only writes, which stand until the next change in the namespace, as between a real controller's
        resyncs), and every quota of a namespace when an object there changes."""
        if rt.key == QUOTA_KEY:
            before = ((previous or {}).get("spec") or {}).get("hard")
            if event == "ADDED" or (event == "MODIFIED" and before != ((obj.get("spec") or {}).get("hard"))):
                self.sync(obj)
            return
        namespace = obj["metadata"].get("namespace")
        if namespace:
            for quota in self._objects(QUOTA_KEY, namespace):
                self.sync(quota)

    def watches(self, obj: dict) -> bool:
        """Only changes in a namespace that has a quota matter (a dictionary look-up per write)."""
        namespace = obj["metadata"].get("namespace")
        return bool(namespace) and bool(self.store._objects.get(QUOTA_KEY, {}).get(namespace))

    # Admission -------------------------------------------------------------------------------------------------

    def default_from_limit_ranges(self, pod: dict) -> None:
        namespace = pod["metadata"].get("namespace", "")
        for limit_range in self._objects(LIMIT_RANGE_KEY, namespace):
            for item in (limit_range.get("spec") or {}).get("limits") or ():
                if item.get("type") != "Container":
                    continue
                for key in ("containers", "initContainers"):
                    for ctr in (pod.get("spec") or {}).get(key) or ():
                        resources = ctr.setdefault("resources", {})
                        for part, source in (("requests", "defaultRequest"), ("limits", "default")):
                            for name, value in (item.get(source) or {}).items():
                                if name not in (resources.get(part) or {}):
                                    resources.setdefault(part, {})[name] = value
                        if not resources:
                            del ctr["resources"]

    def admit_pod(self, pod: dict, *, claim: bool = False) -> None:
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        requested = {**claim_usage(pod), "count/resourceclaims.resource.k8s.io": Decimal(1)} if claim \
            else pod_usage(pod)
        kind = "resourceclaims.resource.k8s.io" if claim else "pods"
        for quota in sorted(self._objects(QUOTA_KEY, namespace), key=lambda q: q["metadata"]["name"]):
            hard = (quota.get("spec") or {}).get("hard") or {}
            missing = "" if claim else self._missing(pod, hard)
            if missing:
                raise self._forbidden(name, f"failed quota: {quota['metadata']['name']}: {missing}")
            used = self.usage(namespace, hard)
            over = sorted(k for k in hard if requested.get(k, 0) > 0 and used[k] + requested[k] > _q(hard[k]))
            if over:
                message = (f"exceeded quota: {quota['metadata']['name']}, "
                           f"requested: {_listing(requested, over, hard)}, used: {_listing(used, over, hard)}, "
                           "limited: " + ",".join(f"{k}={hard[k]}" for k in over))
                raise self._forbidden(name, message, kind)

    @staticmethod
    def _missing(pod: dict, hard: dict) -> str:
        """Each container must state the cpu/memory a quota tracks (the evaluator's Constraints, a compatibility
        rule kept upstream); listed by resource name as the quota spells it, sorted."""
        spec = pod.get("spec") or {}
        parts = []
        for resource in sorted(r for r in hard if r in _MUST_SPECIFY):
            part, name = _MUST_SPECIFY[resource]
            lacking = sorted({c.get("name", "") for key in ("containers", "initContainers") for c in spec.get(key) or ()
                              if name not in ((c.get("resources") or {}).get(part) or {})})
            if lacking:
                parts.append(f"{resource} for: {','.join(lacking)}")
        return ("must specify " + "; ".join(parts)) if parts else ""

    @staticmethod
    def _forbidden(name: str, message: str, kind: str = "pods") -> ApiError:
        return ApiError(403, "Forbidden", f'{kind} "{name}" is forbidden: {message}', name=name, kind=kind)
