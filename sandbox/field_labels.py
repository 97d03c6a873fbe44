"""Which fields a list, watch or collection delete may select on, per kind, as kube-apiserver allows them.

Every kind takes metadata.name and metadata.namespace. A built-in kind takes the fields its registry strategy
exports beside them (pkg/registry/core/pod/strategy.go PodToSelectableFields, core/event, core/node,
core/namespace, core/secret, core/replicationcontroller, apps/replicaset, batch/job strategy.go), and refuses any
other with "field label not supported" (pkg/apis/*/v1/conversion.go AddFieldLabelConversionFunc). A custom kind
takes its CRD version's selectableFields (apiextensions.k8s.io/v1 CustomResourceDefinitionVersion); anything else
is refused as k8s.io/apimachinery runtime.DefaultMetaV1FieldSelectorConversion words it. Either refusal is a
400 Bad Request.
"""

from __future__ import annotations

from . import errors

COMMON = ("metadata.name", "metadata.namespace")
_INVOLVED = tuple(f"involvedObject.{f}" for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                                                   "fieldPath"))
BUILTIN = {
    ("", "Pod"): ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                  "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    ("", "Event"): (*_INVOLVED, "reason", "reportingComponent", "source", "type"),
    ("", "Node"): ("spec.unschedulable",),
    ("", "Namespace"): ("status.phase",),
    ("", "Secret"): ("type",),
    ("", "ReplicationController"): ("status.replicas",),
    ("apps", "ReplicaSet"): ("status.replicas",),
    ("batch", "Job"): ("status.successful",),
}
# A label that is not the object's path: an Event's `source` is its source.component (core/event strategy.go).
PATHS = {(("", "Event"), "source"): "source.component"}


def allowed(rt, version: str | None = None) -> tuple[str, ...]:
    if rt.builtin:
        return COMMON + BUILTIN.get(rt.key, ())
    fields = rt.selectable_fields.get(version or rt.versions[0]) or ()
    return COMMON + tuple(fields)


def check(rt, labels: list[str], version: str | None = None) -> None:
    """Refuse, as the API server does, a selector on a field the kind does not export."""
    permitted = allowed(rt, version)
    for label in labels:
        if label in permitted:
            continue
        if rt.builtin and rt.key in BUILTIN:
            raise errors.bad_request(f"field label not supported: {label}")
        raise errors.bad_request(f'"{label}" is not a known field selector: only "metadata.name", '
                                 f'"metadata.namespace"')


def path(rt, label: str) -> str:
    return PATHS.get((rt.key, label), label)
