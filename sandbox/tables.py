"""Server-side printing: `application/json;as=Table;g=meta.k8s.io;v=v1` answers (what `kubectl get` asks for).

Columns of built-in kinds follow kube-apiserver's printers (pkg/printers/internalversion/printers.go: columns with
priority 1 show only with `-o wide`); a kind without a printer gets Name and Created At (the default table
convertor); custom kinds get their CRD version's additionalPrinterColumns after Name, or Name and Age when it has
none (apiextensions-apiserver pkg/registry/customresource/tableconvertor). Ages are HumanDuration strings
(k8s.io/apimachinery/pkg/util/duration), dates RFC 3339 for kubectl to turn into ages.
"""

from __future__ import annotations

import calendar
import re
import time

from .quantity import parse_quantity

_DESCRIPTIONS = {"Name": "Name must be unique within a namespace.",
                 "Age": "CreationTimestamp is a timestamp representing the server time when this object was created."}


def wants_table(accept: str | None) -> bool:
    return bool(accept) and "as=Table" in accept


def human_duration(seconds: float) -> str:
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(obj: dict) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    return human_duration(time.time() - created)


def _column(name: str, kind: str = "string", priority: int = 0, fmt: str = "", description: str = "") -> dict:
    return {"name": name, "type": kind, "format": fmt, "description": description or _DESCRIPTIONS.get(name, name),
            "priority": priority}


# Built-in printers ---------------------------------------------------------------------------------------------

def _pod(o):
    statuses = (o.get("status") or {}).get("containerStatuses") or []
    containers = (o.get("spec") or {}).get("containers") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(c.get("restartCount", 0) for c in statuses)
    status = o.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    if o["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    gates = (o.get("spec") or {}).get("readinessGates") or []
    return [f"{ready}/{len(containers)}", reason, restarts, _age(o), status.get("podIP") or "<none>",
            (o.get("spec") or {}).get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>",
            f"0/{len(gates)}" if gates else "<none>"]


def _job(o):
    spec, status = o.get("spec") or {}, o.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    if conditions.get("Complete") == "True":
        state = "Complete"
    elif conditions.get("Failed") == "True":
        state = "Failed"
    elif o["metadata"].get("deletionTimestamp"):
        state = "Terminating"
    elif conditions.get("Suspended") == "True" or spec.get("suspend"):
        state = "Suspended"
    elif conditions.get("FailureTarget") == "True":
        state = "FailureTarget"
    else:
        state = "Running"
    completions = f"{status.get('succeeded', 0)}/{spec['completions']}" if spec.get("completions") is not None \
        else f"{status.get('succeeded', 0)}/1 of {spec.get('parallelism', 1)}"
    duration = ""
    if status.get("startTime"):
        start = calendar.timegm(time.strptime(status["startTime"], "%Y-%m-%dT%H:%M:%SZ"))
        end = calendar.timegm(time.strptime(status["completionTime"], "%Y-%m-%dT%H:%M:%SZ")) \
            if status.get("completionTime") else time.time()
        duration = human_duration(end - start)
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = ",".join(f"{k}={v}" for k, v in ((spec.get("selector") or {}).get("matchLabels") or {}).items())
    return [state, completions, duration, _age(o), ",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers), selector or "<none>"]


def _service(o):
    spec = o.get("spec") or {}
    ports = ",".join(f"{p.get('port')}{'' if not p.get('nodePort') else ':' + str(p['nodePort'])}/"
                     f"{p.get('protocol', 'TCP')}" for p in spec.get("ports") or ()) or "<none>"
    external = ",".join(spec.get("externalIPs") or ()) or ("<pending>" if spec.get("type") == "LoadBalancer"
                                                          else "<none>")
    selector = ",".join(f"{k}={v}" for k, v in (spec.get("selector") or {}).items()) or "<none>"
    return [spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>", external, ports, _age(o), selector]


def _quota(o):
    hard, used = (o.get("status") or {}).get("hard") or {}, (o.get("status") or {}).get("used") or {}

    def listing(prefix):
        names = sorted(k for k in hard if k.startswith(prefix) == bool(prefix) and
                       (prefix or not k.startswith("limits.")))
        return ", ".join(f"{k}: {used.get(k, '0')}/{hard[k]}" for k in names)

    return [_age(o), listing(""), listing("limits.")]


def _deployment(o):
    spec, status = o.get("spec") or {}, o.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = ",".join(f"{k}={v}" for k, v in ((spec.get("selector") or {}).get("matchLabels") or {}).items())
    return [f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}", status.get("updatedReplicas", 0),
            status.get("availableReplicas", 0), _age(o), ",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers), selector]


_PRINTERS = {
    ("", "Pod"): ([_column("Ready"), _column("Status"), _column("Restarts", "string"), _column("Age"),
                   _column("IP", priority=1), _column("Node", priority=1), _column("Nominated Node", priority=1),
                   _column("Readiness Gates", priority=1)], _pod),
    ("", "Namespace"): ([_column("Status"), _column("Age")],
                        lambda o: [(o.get("status") or {}).get("phase", "Active"), _age(o)]),
    ("", "ConfigMap"): ([_column("Data", "integer"), _column("Age")],
                        lambda o: [len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age(o)]),
    ("", "Secret"): ([_column("Type"), _column("Data", "integer"), _column("Age")],
                     lambda o: [o.get("type", "Opaque"), len(o.get("data") or {}), _age(o)]),
    ("", "Service"): ([_column("Type"), _column("Cluster-IP"), _column("External-IP"), _column("Port(s)"),
                       _column("Age"), _column("Selector", priority=1)], _service),
    ("", "ResourceQuota"): ([_column("Age"), _column("Request"), _column("Limit")], _quota),
    ("", "ServiceAccount"): ([_column("Secrets", "integer"), _column("Age")],
                             lambda o: [len(o.get("secrets") or ()), _age(o)]),
    ("batch", "Job"): ([_column("Status"), _column("Completions"), _column("Duration"), _column("Age"),
                        _column("Containers", priority=1), _column("Images", priority=1),
                        _column("Selector", priority=1)], _job),
    ("apps", "Deployment"): ([_column("Ready"), _column("Up-to-date", "integer"), _column("Available", "integer"),
                              _column("Age"), _column("Containers", priority=1), _column("Images", priority=1),
                              _column("Selector", priority=1)], _deployment),
    ("scheduling.k8s.io", "PriorityClass"): (
        [_column("Value", "integer"), _column("Global-Default", "boolean"), _column("Age"),
         _column("Preemption Policy", priority=1)],
        lambda o: [o.get("value", 0), bool(o.get("globalDefault")), _age(o),
                   o.get("preemptionPolicy", "PreemptLowerPriority")]),
    ("rbac.authorization.k8s.io", "RoleBinding"): (
        [_column("Role"), _column("Age")],
        lambda o: [f"{(o.get('roleRef') or {}).get('kind')}/{(o.get('roleRef') or {}).get('name')}", _age(o)]),
}


# Custom resources: printer columns by JSONPath -----------------------------------------------------------------

_STEP = re.compile(r"\.([^.\[]+)|\[(\*|\d+)\]|\[\?\(@\.([\w.]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def jsonpath(obj, path: str) -> list:
    """The subset of JSONPath CRD printer columns use: fields, [n], [*] and [?(@.field=="value")]."""
    nodes = [obj]
    for m in _STEP.finditer(path.strip().strip("{}")):
        field, index, key, value = m.groups()
        out = []
        for node in nodes:
            if field is not None and isinstance(node, dict) and field in node:
                out.append(node[field])
            elif index is not None and isinstance(node, list):
                out.extend(node if index == "*" else node[int(index):int(index) + 1])
            elif key is not None and isinstance(node, list):
                for item in node:
                    probe = item
                    for part in key.split("."):
                        probe = probe.get(part) if isinstance(probe, dict) else None
                    if probe is not None and str(probe) == value:
                        out.append(item)
        nodes = out
    return nodes


def _cell(values: list, kind: str):
    if not values:
        return None
    value = values[0] if len(values) == 1 else " ".join(str(v) for v in values)
    if kind == "integer" and isinstance(value, str):
        try:
            return int(parse_quantity(value))
        except ValueError:
            return value
    return value


def _columns(rt, version: str) -> tuple[list[dict], callable]:
    if rt.builtin:
        if rt.key in _PRINTERS:
            columns, printer = _PRINTERS[rt.key]
            return [_column("Name", fmt="name"), *columns], lambda o: [o["metadata"]["name"], *printer(o)]
        return ([_column("Name", fmt="name"), _column("Created At", "date")],
                lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")])
    specs = rt.printer_columns.get(version) or []
    if not specs:
        return ([_column("Name", fmt="name"), _column("Age", "date")],
                lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")])
    columns = [_column("Name", fmt="name")] + [
        _column(c["name"], c.get("type", "string"), c.get("priority", 0), c.get("format", ""),
                c.get("description", "")) for c in specs]
    return columns, lambda o: [o["metadata"]["name"]] + [_cell(jsonpath(o, c["jsonPath"]), c.get("type", "string"))
                                                          for c in specs]


def _row_object(obj: dict, include: str):
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def table(rt, version: str, items: list[dict], list_meta: dict, include: str = "Metadata",
          headers: bool = True) -> dict:
    columns, printer = _columns(rt, version)
    rows = []
    for obj in items:
        row = {"cells": printer(obj)}
        included = _row_object(obj, include)
        if included is not None:
            row["object"] = included
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
            "columnDefinitions": columns if headers else [], "rows": rows}
