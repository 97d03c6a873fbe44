"""What the cluster reports of a team's quota objects, recorded on its TeamNamespace (one writer, used by
reconcile and by the cluster watcher)."""

from __future__ import annotations

from backends import backends
from portal import kube
from tenants.models import TeamNamespace

USAGE_KINDS = ("ResourceQuota", "ClusterQueue", "Queue", "LocalQueue")


def _gpu_units(quantities: dict | None) -> dict[str, int]:
    """Extended (GPU) resources of a `requests.<name>`-keyed or plain resource map, in whole units."""
    units = {}
    for key, value in (quantities or {}).items():
        name = key.removeprefix("requests.")
        if "/" in name and not name.startswith("limits."):
            units[name] = kube.quantity_units(value)
    return units


def quota_status_from(actual: list[dict]) -> dict:
    """What the cluster says of a team's quota, from the status of the objects it owns: the ResourceQuota's
    `hard` (what the API server enforces) and `used` (the quota controller's count), Kueue's ClusterQueue
    `flavorsUsage` (units in use per flavor), Volcano's Queue `allocated` (per resource), and the usage the
    scheduler remembers over time (`decayed`: Kueue's LocalQueue admission fair-sharing status)."""
    result: dict = {}
    for obj in actual:
        status = obj.get("status") or {}
        if obj["kind"] == "ResourceQuota":
            # Only what the quota controller reported: a quota it has not counted yet says nothing.
            for part in ("hard", "used"):
                if status.get(part) is not None:
                    result[part] = _gpu_units(status[part])
        elif obj["kind"] == "ClusterQueue":
            result["flavors"] = {
                f["name"]: _gpu_units({r["name"]: r.get("total", "0") for r in f.get("resources") or []})
                for f in status.get("flavorsUsage") or []
            }
        elif obj["kind"] == "Queue" and status.get("allocated") is not None:
            result["allocated"] = _gpu_units(status.get("allocated"))
    for backend in backends():  # usage remembered over time, where the scheduler keeps it
        decayed = backend.decayed_usage(actual)
        if decayed is not None:
            result["decayed"] = decayed
    return result


def record_usage(row: TeamNamespace, actual: list[dict]) -> None:
    """GPU units in use and enforced, as the cluster reports them; written only when they changed."""
    quota_status = quota_status_from(actual)
    usage = quota_status.get("used", {})
    changed = {name: value for name, value in (("usage", usage), ("quota_status", quota_status))
               if getattr(row, name) != value}
    if changed:
        for name, value in changed.items():
            setattr(row, name, value)
        TeamNamespace.objects.filter(pk=row.pk).update(**changed)
