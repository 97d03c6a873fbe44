"""How pages show a Kubernetes object the portal manages: its apiVersion in URLs, status rows, and YAML (the
desired object, or the live one read from the cluster)."""

from django.http import Http404
from django.shortcuts import render

from portal import yamltext
from portal.kube import KubeError

from . import selectors

CORE_GROUP = "core"  # stands for the empty API group of v1 objects in URLs


def api_version_parts(api_version: str) -> tuple[str, str]:
    """'rbac.authorization.k8s.io/v1' → ('rbac.authorization.k8s.io', 'v1'); 'v1' → ('core', 'v1')."""
    group, _, version = api_version.rpartition("/")
    return group or CORE_GROUP, version


def api_version_from_parts(group: str, version: str) -> str:
    return version if group == CORE_GROUP else f"{group}/{version}"


def object_rows(statuses: list[dict], url_for) -> list[dict]:
    return [{**status, "url": url_for(status)} for status in statuses]


def pending(desired: list[dict]) -> list[dict]:
    """Desired objects not yet reported by a reconcile, shaped like objects_status entries."""
    return [{"apiVersion": o["apiVersion"], "kind": o["kind"], "namespace": o["metadata"].get("namespace", ""),
             "name": o["metadata"]["name"], "state": "pending", "message": ""} for o in desired]


def find_object(desired: list[dict], api_version: str, kind: str, name: str) -> dict:
    for obj in desired:
        if obj["apiVersion"] == api_version and obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise Http404("Not one of the objects the portal manages here")


def live_yaml(cluster, obj: dict) -> dict:
    """The live object as YAML, or why there is none; a cluster that cannot be read is a message, not a 500."""
    meta = obj["metadata"]
    try:
        live = selectors.live_object(cluster=cluster, api_version=obj["apiVersion"], kind=obj["kind"],
                                     name=meta["name"], namespace=meta.get("namespace"))
    except KubeError as exc:
        return {"error": str(exc)}
    if live is None:
        return {"absent": True}
    live.get("metadata", {}).pop("managedFields", None)
    return {"yaml": yamltext.dump(live)}


def object_status(row, obj) -> dict:
    meta = obj["metadata"]
    for status in row.objects_status:
        if (status["apiVersion"], status["kind"], status["name"]) == (obj["apiVersion"], obj["kind"], meta["name"]):
            return status
    return {"state": "pending", "message": ""}


def live_response(request, cluster, obj, *, back_url):
    template = "tenants/_live_object.html" if request.htmx else "tenants/object_live.html"
    return render(request, template, {"cluster": cluster, "obj": obj, "live": live_yaml(cluster, obj),
                                      "back_url": back_url})
