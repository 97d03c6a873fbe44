"""The protobuf request bodies kubectl's imperative `create` commands send.

kube-apiserver decodes `application/vnd.kubernetes.protobuf` for every built-in kind from the generated Go types
(k8s.io/api v0.33 */generated.proto). The sandbox keeps, by their field numbers in those .proto files, the fields
that every `kubectl create <kind>` subcommand of kubectl sets (namespace, configmap, secret, serviceaccount,
quota, priorityclass, deployment, service, job, cronjob, role, rolebinding, clusterrole, clusterrolebinding,
poddisruptionbudget, ingress): the envelope (runtime.Unknown: 1 typeMeta {1 apiVersion, 2 kind}, 2 raw),
ObjectMeta (1 name, 2 generateName, 3 namespace, 11 labels, 12 annotations, 13 ownerReferences, 14 finalizers),
each kind's own fields, and pod templates' containers (name, image, command, args, ports, env, resources).
Anything else is answered 415.
"""

from __future__ import annotations

import base64

MAGIC = b"k8s\x00"

_OWNER = {1: ("kind", "s"), 3: ("name", "s"), 4: ("uid", "s"), 5: ("apiVersion", "s"), 6: ("controller", "boolp"),
          7: ("blockOwnerDeletion", "boolp")}
_META = {1: ("name", "s"), 2: ("generateName", "s"), 3: ("namespace", "s"), 11: ("labels", "map"),
         12: ("annotations", "map"), 13: ("ownerReferences", ("repeated", _OWNER)), 14: ("finalizers", "list")}
_REQUIREMENT = {1: ("key", "s"), 2: ("operator", "s"), 3: ("values", "list")}
_LABEL_SELECTOR = {1: ("matchLabels", "map"), 2: ("matchExpressions", ("repeated", _REQUIREMENT))}
_CONTAINER_PORT = {1: ("name", "s"), 2: ("hostPort", "int0"), 3: ("containerPort", "int"), 4: ("protocol", "s")}
_RESOURCES = {1: ("limits", "quantities"), 2: ("requests", "quantities")}
_ENV = {1: ("name", "s"), 2: ("value", "s")}
_CONTAINER = {1: ("name", "s"), 2: ("image", "s"), 3: ("command", "list"), 4: ("args", "list"),
              5: ("workingDir", "s"), 6: ("ports", ("repeated", _CONTAINER_PORT)), 7: ("env", ("repeated", _ENV)),
              8: ("resources", _RESOURCES), 14: ("imagePullPolicy", "s")}
_POD_SPEC = {2: ("containers", ("repeated", _CONTAINER)), 3: ("restartPolicy", "s"), 6: ("dnsPolicy", "s"),
             7: ("nodeSelector", "map"), 8: ("serviceAccountName", "s"), 19: ("schedulerName", "s"),
             20: ("initContainers", ("repeated", _CONTAINER))}
_POD_TEMPLATE = {1: ("metadata", _META), 2: ("spec", _POD_SPEC)}
_SERVICE_PORT = {1: ("name", "s"), 2: ("protocol", "s"), 3: ("port", "int"), 4: ("targetPort", "intorstring"),
                 5: ("nodePort", "int0")}
# batch/v1: every JobSpec and CronJobSpec field kubectl may set is a pointer in Go, so present means set.
_JOB_SPEC = {1: ("parallelism", "int"), 2: ("completions", "int"), 3: ("activeDeadlineSeconds", "int"),
             4: ("selector", _LABEL_SELECTOR), 5: ("manualSelector", "boolp"), 6: ("template", _POD_TEMPLATE),
             7: ("backoffLimit", "int"), 8: ("ttlSecondsAfterFinished", "int"), 9: ("completionMode", "s"),
             10: ("suspend", "boolp"), 12: ("backoffLimitPerIndex", "int"), 13: ("maxFailedIndexes", "int"),
             14: ("podReplacementPolicy", "s"), 15: ("managedBy", "s")}
_CRON_JOB_SPEC = {1: ("schedule", "s"), 2: ("startingDeadlineSeconds", "int"), 3: ("concurrencyPolicy", "s"),
                  4: ("suspend", "boolp"), 5: ("jobTemplate", {1: ("metadata", _META), 2: ("spec", _JOB_SPEC)}),
                  6: ("successfulJobsHistoryLimit", "int"), 7: ("failedJobsHistoryLimit", "int"), 8: ("timeZone", "s")}
# rbac/v1
_POLICY_RULE = {1: ("verbs", "list"), 2: ("apiGroups", "list"), 3: ("resources", "list"),
                4: ("resourceNames", "list"), 5: ("nonResourceURLs", "list")}
_SUBJECT = {1: ("kind", "s"), 2: ("apiGroup", "s"), 3: ("name", "s"), 4: ("namespace", "s")}
_ROLE_REF = {1: ("apiGroup", "s"), 2: ("kind", "s"), 3: ("name", "s")}
_BINDING = {1: ("metadata", _META), 2: ("subjects", ("repeated", _SUBJECT)), 3: ("roleRef", _ROLE_REF)}
# networking/v1 Ingress; IngressRule embeds IngressRuleValue (its `http` is the rule's own field in JSON).
_BACKEND = {4: ("service", {1: ("name", "s"), 2: ("port", {1: ("name", "s"), 2: ("number", "int0")})}),
            3: ("resource", {1: ("apiGroup", "s"), 2: ("kind", "s"), 3: ("name", "s")})}
_INGRESS_PATH = {1: ("path", "s"), 3: ("pathType", "s"), 2: ("backend", _BACKEND)}
_INGRESS_RULE = {1: ("host", "s"),
                 2: ("", ("inline", {1: ("http", {1: ("paths", ("repeated", _INGRESS_PATH))})}))}
_INGRESS_SPEC = {4: ("ingressClassName", "s"), 1: ("defaultBackend", _BACKEND),
                 2: ("tls", ("repeated", {1: ("hosts", "list"), 2: ("secretName", "s")})),
                 3: ("rules", ("repeated", _INGRESS_RULE))}
_PDB_SPEC = {1: ("minAvailable", "intorstring"), 2: ("selector", _LABEL_SELECTOR),
             3: ("maxUnavailable", "intorstring"), 4: ("unhealthyPodEvictionPolicy", "s")}

_KINDS = {
    ("v1", "Namespace"): {1: ("metadata", _META), 2: ("spec", {1: ("finalizers", "list")})},
    ("v1", "ConfigMap"): {1: ("metadata", _META), 2: ("data", "map"), 3: ("binaryData", "bytesmap"),
                          4: ("immutable", "bool")},
    ("v1", "Secret"): {1: ("metadata", _META), 2: ("data", "bytesmap"), 3: ("type", "s"), 4: ("stringData", "map"),
                       5: ("immutable", "bool")},
    ("v1", "ServiceAccount"): {1: ("metadata", _META), 4: ("automountServiceAccountToken", "bool")},
    ("v1", "ResourceQuota"): {1: ("metadata", _META), 2: ("spec", {1: ("hard", "quantities"), 2: ("scopes", "list")})},
    ("apps/v1", "Deployment"): {1: ("metadata", _META), 2: ("spec", {
        1: ("replicas", "int"), 2: ("selector", _LABEL_SELECTOR), 3: ("template", _POD_TEMPLATE),
        4: ("strategy", {1: ("type", "s")}), 5: ("minReadySeconds", "int0"), 7: ("paused", "bool")})},
    ("v1", "Service"): {1: ("metadata", _META), 2: ("spec", {
        1: ("ports", ("repeated", _SERVICE_PORT)), 2: ("selector", "map"), 3: ("clusterIP", "s"), 4: ("type", "s"),
        7: ("externalName", "s")})},
    ("scheduling.k8s.io/v1", "PriorityClass"): {1: ("metadata", _META), 2: ("value", "int"),
                                                3: ("globalDefault", "bool"), 4: ("description", "s"),
                                                5: ("preemptionPolicy", "s")},
    ("batch/v1", "Job"): {1: ("metadata", _META), 2: ("spec", _JOB_SPEC)},
    ("batch/v1", "CronJob"): {1: ("metadata", _META), 2: ("spec", _CRON_JOB_SPEC)},
    ("rbac.authorization.k8s.io/v1", "Role"): {1: ("metadata", _META), 2: ("rules", ("repeated", _POLICY_RULE))},
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): {
        1: ("metadata", _META), 2: ("rules", ("repeated", _POLICY_RULE)),
        3: ("aggregationRule", {1: ("clusterRoleSelectors", ("repeated", _LABEL_SELECTOR))})},
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _BINDING,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): _BINDING,
    ("policy/v1", "PodDisruptionBudget"): {1: ("metadata", _META), 2: ("spec", _PDB_SPEC)},
    ("networking.k8s.io/v1", "Ingress"): {1: ("metadata", _META), 2: ("spec", _INGRESS_SPEC)},
}


class Unsupported(ValueError):
    """A protobuf body the sandbox cannot read (not the envelope, or a kind it keeps no field numbers for)."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise Unsupported("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited fields."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = int.from_bytes(data[pos:pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos:pos + 4], "little"), pos + 4
        else:
            raise Unsupported(f"wire type {wire}")
        out.append((number, value))
    return out


def _entry(raw: bytes) -> tuple[str, bytes]:
    parts = dict(fields(raw))
    return parts.get(1, b"").decode(), parts.get(2, b"")


def _message(raw: bytes, schema: dict) -> dict:
    out: dict = {}
    for number, value in fields(raw):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, dict):
            nested = _message(value, kind)
            if nested:
                out[name] = nested
        elif kind == "s":
            if value:
                out[name] = value.decode()
        elif isinstance(kind, tuple) and kind[0] == "inline":  # an embedded Go struct: its fields are ours
            out.update(_message(value, kind[1]))
        elif isinstance(kind, tuple):  # a repeated message
            out.setdefault(name, []).append(_message(value, kind[1]))
        elif kind in ("int", "int0"):
            number = value - (1 << 64) if value >= 1 << 63 else value
            if number or kind == "int":
                out[name] = number
        elif kind == "intorstring":
            parts = dict(fields(value))
            out[name] = parts.get(3, b"").decode() if parts.get(1) == 1 else parts.get(2, 0)
        elif kind == "bool":
            if value:
                out[name] = True
        elif kind == "boolp":  # a *bool: present means set, false included
            out[name] = bool(value)
        elif kind == "list":
            out.setdefault(name, []).append(value.decode())
        elif kind == "map":
            key, item = _entry(value)
            out.setdefault(name, {})[key] = item.decode()
        elif kind == "bytesmap":
            key, item = _entry(value)
            out.setdefault(name, {})[key] = base64.b64encode(item).decode()
        elif kind == "quantities":
            key, item = _entry(value)
            out.setdefault(name, {})[key] = dict(fields(item)).get(1, b"").decode()
    return out


def decode(body: bytes) -> dict:
    """The object in a `application/vnd.kubernetes.protobuf` body, as JSON would carry it."""
    if not body.startswith(MAGIC):
        raise Unsupported("the body does not start with the protobuf envelope's magic bytes")
    envelope = dict(fields(body[len(MAGIC):]))
    type_meta = dict(fields(envelope.get(1, b"")))
    api_version, kind = type_meta.get(1, b"").decode(), type_meta.get(2, b"").decode()
    schema = _KINDS.get((api_version, kind))
    if schema is None:
        raise Unsupported(f"{kind} in {api_version}")
    return {"apiVersion": api_version, "kind": kind, **_message(envelope.get(2, b""), schema)}
