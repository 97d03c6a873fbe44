"""Hand-written cases: a valid object of every kind the portal sends (and a few it reads), then the same object
broken against a core or CRD rule, each sent as a dry-run create (or, where the rule needs state, after setup
requests sent for real). Every case names the rule it tests."""

from __future__ import annotations

import copy
import json

NAMESPACE = "fidelity"
DRY = "?dryRun=All"
STRICT = "?dryRun=All&fieldValidation=Strict"

# kind -> (apiVersion, plural, namespaced, a valid object's body without apiVersion/kind/metadata.name)
CONTAINER = {"name": "main", "image": "ghcr.io/acme/train:1",
             "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}
POD_SPEC = {"restartPolicy": "Never", "containers": [CONTAINER]}
KINDS = {
    "Namespace": ("v1", "namespaces", False, {}),
    "ResourceQuota": ("v1", "resourcequotas", True, {"spec": {"hard": {
        "requests.nvidia.com/gpu": "8", "requests.cpu": "10", "requests.memory": "10Gi"}}}),
    "LimitRange": ("v1", "limitranges", True, {"spec": {"limits": [{
        "type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"}}]}}),
    "Service": ("v1", "services", True, {"spec": {"clusterIP": "None", "selector": {"app": "x"},
                                                  "ports": [{"name": "rdzv", "port": 29500}]}}),
    "ConfigMap": ("v1", "configmaps", True, {"data": {"a": "b"}}),
    "Pod": ("v1", "pods", True, {"spec": POD_SPEC}),
    "Job": ("batch/v1", "jobs", True, {"spec": {"suspend": True, "template": {"spec": POD_SPEC}}}),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses", False, {"value": 1000}),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings", True, {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml"}]}),
    "NetworkPolicy": ("networking.k8s.io/v1", "networkpolicies", True, {
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
    "ResourceClaimTemplate": ("resource.k8s.io/v1", "resourceclaimtemplates", True, {"spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}),
    "ResourceFlavor": ("kueue.x-k8s.io/v1beta2", "resourceflavors", False, {"spec": {"nodeLabels": {"gpu": "h100"}}}),
    "ClusterQueue": ("kueue.x-k8s.io/v1beta2", "clusterqueues", False, {"spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]}}),
    "LocalQueue": ("kueue.x-k8s.io/v1beta2", "localqueues", True, {"spec": {"clusterQueue": "team"}}),
    "Cohort": ("kueue.x-k8s.io/v1beta2", "cohorts", False, {"spec": {}}),
    "Topology": ("kueue.x-k8s.io/v1beta2", "topologies", False, {"spec": {"levels": [
        {"nodeLabel": "topology.gpu-portal.io/block"}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
    "WorkloadPriorityClass": ("kueue.x-k8s.io/v1beta2", "workloadpriorityclasses", False, {"value": 100}),
    "Queue": ("scheduling.volcano.sh/v1beta1", "queues", False, {"spec": {"weight": 1, "reclaimable": True}}),
    "VolcanoJob": ("batch.volcano.sh/v1alpha1", "jobs", True, {"spec": {
        "minAvailable": 1, "schedulerName": "volcano", "queue": "team",
        "tasks": [{"name": "worker", "replicas": 1, "template": {"spec": POD_SPEC}}]}}),
    "PodGroup": ("scheduling.volcano.sh/v1beta1", "podgroups", True, {"spec": {"minMember": 1, "queue": "team"}}),
    "HyperNode": ("topology.volcano.sh/v1alpha1", "hypernodes", False, {"spec": {"tier": 1, "members": [
        {"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}}]}}),
    "RayJob": ("ray.io/v1", "rayjobs", True, {"spec": {"entrypoint": "python main.py", "rayClusterSpec": {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [CONTAINER]}}},
        "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                              "rayStartParams": {}, "template": {"spec": {"containers": [CONTAINER]}}}]}}}),
}
REAL_KIND = {"VolcanoJob": "Job"}


def base(kind: str, name: str = "valid") -> dict:
    api_version, _, namespaced, body = KINDS[kind]
    meta = {"name": name, **({"namespace": NAMESPACE} if namespaced else {})}
    return {"apiVersion": api_version, "kind": REAL_KIND.get(kind, kind), "metadata": meta, **copy.deepcopy(body)}


def collection(kind: str, namespace: str = NAMESPACE) -> str:
    api_version, plural, namespaced, _ = KINDS[kind]
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{root}{f'/namespaces/{namespace}' if namespaced else ''}/{plural}"


def _set(obj: dict, path: str, value) -> dict:
    """Set (or, with value DELETE, remove) a dotted path; `[n]` indexes a list."""
    obj = copy.deepcopy(obj)
    keys = [int(k[1:-1]) if k.startswith("[") else k for k in path.replace("[", ".[").split(".") if k]
    target = obj
    for key in keys[:-1]:
        target = target[key] if isinstance(key, int) else target.setdefault(key, {})
    if value is DELETE:
        target.pop(keys[-1], None) if isinstance(target, dict) else target.pop(keys[-1])
    else:
        target[keys[-1]] = value
    return obj


DELETE = object()
LONG = "a" * 64


def _create(kind: str, obj, rule: str, query: str = DRY, setup=()) -> dict:
    return {"source": "hand-written", "kind": kind, "rule": rule, "setup": list(setup),
            "request": {"method": "POST", "path": collection(kind) + query, "body": obj}}


# Breaks of any object's metadata (apimachinery's ValidateObjectMeta and the decoder).
GENERIC = [
    ("metadata.name", "Bad_Name", "name is not a DNS subdomain / label"),
    ("metadata.name", "a" * 254, "name longer than allowed"),
    ("metadata.name", DELETE, "name or generateName is required"),
    ("metadata.labels", {"bad key!": "x"}, "label key is not a qualified name"),
    ("metadata.labels", {"app": LONG}, "label value longer than 63"),
    ("metadata.labels", {"app": "-x"}, "label value does not start with an alphanumeric"),
    ("metadata.annotations", {"bad key!": "x"}, "annotation key is not a qualified name"),
    ("metadata.finalizers", ["bad finalizer"], "finalizer is not a qualified name"),
    ("metadata.finalizers", ["nodomain"], "finalizer without a domain (warning only)"),
    ("metadata.generateName", "gen-", "generateName with a name"),
    ("metadata.ownerReferences", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": ""}],
     "owner reference without uid"),
    ("metadata.labels", {"gpu-portal.io/team": "nlp"}, "a valid label (accepted)"),
]


def _generic_cases(kind: str) -> list[dict]:
    cases = [_create(kind, base(kind), "the valid object is accepted"),
             _create(kind, {**base(kind), "unknownTopField": 1}, "unknown field, strict validation", STRICT),
             _create(kind, {**base(kind), "unknownTopField": 1}, "unknown field, default validation (warning)")]
    for path, value, rule in GENERIC:
        obj = _set(base(kind), path, value)
        if path == "metadata.generateName":
            obj = _set(obj, "metadata.name", DELETE)
        cases.append(_create(kind, obj, rule))
    if KINDS[kind][2]:
        cases.append(_create(kind, _set(base(kind), "metadata.namespace", "other"),
                             "body namespace differs from the URL's"))
    cases.append(_create(kind, {**base(kind), "kind": "Wrong"}, "kind differs from the URL's"))
    return cases


def _spec(kind: str, changes: list[tuple[str, object, str]]) -> list[dict]:
    return [_create(kind, _set(base(kind), path, value), rule) for path, value, rule in changes]


SPECIFIC = {
    "ResourceQuota": [
        ("spec.hard", {"requests.cpu": "-1"}, "negative quantity"),
        ("spec.hard", {"requests.nvidia.com/gpu": "1.5"}, "fractional extended resource"),
        ("spec.hard", {"limits.nvidia.com/gpu": "2"}, "limits of an extended resource"),
        ("spec.hard", {"nvidia.com/gpu": "2"}, "extended resource without requests. prefix"),
        ("spec.hard", {"bad resource": "1"}, "resource name not a qualified name"),
        ("spec.hard", {"requests.cpu": "abc"}, "quantity that does not parse"),
        ("spec.scopes", ["BestEffort"], "scope BestEffort with compute resources"),
        ("spec.scopes", ["Nope"], "unknown scope"),
        ("spec.hard", {"pods": "10", "count/jobs.batch": "3"}, "object counts (accepted)"),
        ("spec.hard", {"requests.storage": "1Ti", "persistentvolumeclaims": "2"}, "storage (accepted)"),
    ],
    "LimitRange": [
        ("spec.limits", [{"type": "Container", "default": {"nvidia.com/gpu": "2"},
                          "defaultRequest": {"nvidia.com/gpu": "1"}}],
         "extended resource default request differs from its default limit (not over-committable)"),
        ("spec.limits", [{"type": "Container", "max": {"nvidia.com/gpu": "2"}, "min": {"nvidia.com/gpu": "1"}}],
         "extended resource min differs from max (accepted)"),
        ("spec.limits", [{"type": "Container", "maxLimitRequestRatio": {"nvidia.com/gpu": "2"}}],
         "extended resource limit/request ratio"),
        ("spec.limits", [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}], "min above max"),
        ("spec.limits", [{"type": "Container", "default": {"cpu": "3"}, "max": {"cpu": "1"}}],
         "default above max"),
        ("spec.limits", [{"type": "Container", "defaultRequest": {"cpu": "3"}, "default": {"cpu": "1"}}],
         "default request above default limit"),
        ("spec.limits", [{"type": "Pod", "default": {"cpu": "1"}}], "default on type Pod"),
        ("spec.limits", [{"type": "Nope", "max": {"cpu": "1"}}], "unknown limit type"),
        ("spec.limits", [{"type": "Container", "maxLimitRequestRatio": {"cpu": "0.5"}}], "ratio below 1"),
        ("spec.limits", [{"type": "Container", "max": {"cpu": "-1"}}], "negative max"),
        ("spec.limits", [{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}}], "PVC limit (accepted)"),
        ("spec.limits", [{"type": "Container", "default": {"nvidia.com/gpu": "1"}}],
         "extended resource default only (accepted)"),
    ],
    "Job": [
        ("spec.completionMode", "Indexed", "Indexed without completions"),
        ("spec.completionMode", "Nope", "unknown completion mode"),
        ("spec.completions", -1, "negative completions"),
        ("spec.parallelism", -1, "negative parallelism"),
        ("spec.backoffLimit", -1, "negative backoff limit"),
        ("spec.template.spec.restartPolicy", "Always", "restartPolicy Always"),
        ("spec.template.spec.containers", [], "no containers"),
        ("spec.activeDeadlineSeconds", 0, "zero active deadline"),
        ("spec.ttlSecondsAfterFinished", -1, "negative TTL"),
        ("spec.backoffLimitPerIndex", 1, "backoffLimitPerIndex without Indexed mode"),
        ("spec.successPolicy", {"rules": [{"succeededCount": 1}]}, "successPolicy without Indexed mode"),
        ("spec.podFailurePolicy", {"rules": [{"action": "FailJob", "onExitCodes": {
            "operator": "In", "values": [0]}}]}, "podFailurePolicy exit code 0 with In"),
        ("spec.template.spec.containers[0].image", "", "empty image"),
        ("spec.template.spec.containers[0].name", "Bad_Name", "container name not a label"),
        ("spec.template.spec.containers[0].resources", {"requests": {"nvidia.com/gpu": "1"}},
         "extended resource request without limit"),
        ("spec.template.spec.containers[0].resources", {"requests": {"nvidia.com/gpu": "1"},
                                                        "limits": {"nvidia.com/gpu": "2"}},
         "extended resource request differs from limit"),
        ("spec.template.spec.containers[0].resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
         "request above limit"),
        ("spec.manualSelector", True, "manualSelector without selector"),
        ("spec.managedBy", "kueue.x-k8s.io/multikueue", "managedBy (accepted)"),
        ("spec.completions", 2, "completions with parallelism default (accepted)"),
    ],
    "Pod": [
        ("spec.containers[0].resources", {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
         "extended resource request differs from limit"),
        ("spec.containers[0].resources", {"limits": {"nvidia.com/gpu": "0.5"}}, "fractional extended resource"),
        ("spec.containers[0].ports", [{"containerPort": 70000}], "port out of range"),
        ("spec.containers[0].env", [{"name": "", "value": "x"}], "env var without name"),
        ("spec.restartPolicy", "Sometimes", "unknown restart policy"),
        ("spec.containers", [CONTAINER, CONTAINER], "duplicate container names"),
        ("spec.tolerations", [{"key": "a", "operator": "Exists", "value": "x"}], "Exists toleration with value"),
        ("spec.nodeSelector", {"bad key!": "x"}, "node selector key invalid"),
        ("spec.priorityClassName", "no-such-class", "unknown priority class (admission)"),
        ("spec.schedulerName", "volcano", "other scheduler (accepted)"),
    ],
    "Service": [
        ("spec.ports", [{"name": "a", "port": 0}], "port 0"),
        ("spec.ports", [{"name": "a", "port": 80}, {"name": "a", "port": 81}], "duplicate port names"),
        ("spec.ports", [{"port": 80}, {"port": 81}], "several ports without names"),
        ("spec.type", "Nope", "unknown type"),
        ("spec.clusterIP", "1.2.3.4", "cluster IP outside the service range"),
        ("spec.selector", {"bad key!": "x"}, "selector key invalid"),
        ("spec.ports", [{"name": "a", "port": 80, "protocol": "ICMP"}], "unknown protocol"),
        ("spec.publishNotReadyAddresses", True, "publishNotReadyAddresses (accepted)"),
    ],
    "PriorityClass": [
        ("value", 2000000000, "value above the user limit"),
        ("preemptionPolicy", "Sometimes", "unknown preemption policy"),
        ("metadata.name", "system-custom", "name with the system- prefix"),
        ("value", DELETE, "value missing"),
        ("globalDefault", True, "a global default (accepted)"),
    ],
    "RoleBinding": [
        ("roleRef.kind", "Nope", "roleRef kind unknown"),
        ("roleRef.name", "", "roleRef without name"),
        ("subjects", [{"kind": "Group", "name": ""}], "subject without name"),
        ("subjects", [{"kind": "ServiceAccount", "name": "x"}], "service account subject without namespace"),
        ("subjects", [{"kind": "Robot", "name": "x"}], "unknown subject kind"),
        ("roleRef.apiGroup", "example.com", "roleRef in another group"),
    ],
    "NetworkPolicy": [
        ("spec.policyTypes", ["Sideways"], "unknown policy type"),
        ("spec.ingress", [{"ports": [{"port": 70000}]}], "port out of range"),
        ("spec.ingress", [{"from": [{"ipBlock": {"cidr": "not-a-cidr"}}]}], "bad CIDR"),
        ("spec.podSelector", {"matchLabels": {"bad key!": "x"}}, "selector key invalid"),
        ("spec.ingress", [{"from": [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"}}}]}], "namespace selector (accepted)"),
    ],
    "ResourceClaimTemplate": [
        ("spec.spec.devices.requests[0].exactly.deviceClassName", "", "request without device class"),
        ("spec.spec.devices.requests[0].name", "Bad_Name", "request name not a label"),
        ("spec.spec.devices.requests[0].exactly.count", 0, "count 0"),
        ("spec.spec.devices.requests[0].exactly.allocationMode", "Some", "unknown allocation mode"),
        ("spec.spec.devices.requests[0].exactly.selectors", [{"cel": {"expression": "device.driver =="}}],
         "CEL selector that does not compile"),
        ("spec.spec.devices.requests[0].exactly.count", 2, "count 2 (accepted)"),
        ("spec.spec.devices.requests", [], "no requests (accepted)"),
    ],
    "ClusterQueue": [
        ("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "-1", "negative nominal quota"),
        ("spec.resourceGroups[0].coveredResources", [], "no covered resources"),
        ("spec.queueingStrategy", "Random", "unknown queueing strategy"),
        ("spec.cohortName", "Bad_Name", "cohort name invalid"),
        ("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit", "2",
         "borrowing limit without cohort"),
        ("spec.preemption", {"reclaimWithinCohort": "Sometimes"}, "unknown reclaim policy"),
        ("spec.fairSharing", {"weight": "2"}, "fair sharing weight (accepted)"),
        ("spec.stopPolicy", "Hold", "stop policy (accepted)"),
    ],
    "LocalQueue": [("spec.clusterQueue", "Bad_Name", "cluster queue name invalid"),
                   ("spec.clusterQueue", DELETE, "cluster queue missing"),
                   ("spec.stopPolicy", "Nope", "unknown stop policy")],
    "ResourceFlavor": [("spec.nodeLabels", {"bad key!": "x"}, "node label key invalid"),
                       ("spec.nodeTaints", [{"key": "a", "effect": "Sometimes"}], "unknown taint effect"),
                       ("spec.tolerations", [{"key": "a", "operator": "Nope"}], "unknown toleration operator"),
                       ("spec.topologyName", "default", "topology name without node labels")],
    "Topology": [("spec.levels", [], "no levels"),
                 ("spec.levels", [{"nodeLabel": "a"}, {"nodeLabel": "a"}], "duplicate levels"),
                 ("spec.levels", [{"nodeLabel": "bad key!"}], "level label invalid")],
    "Cohort": [("spec.parentName", "Bad_Name", "parent name invalid"),
               ("spec.fairSharing", {"weight": "-1"}, "negative weight")],
    "WorkloadPriorityClass": [("value", "high", "value not an integer")],
    "Queue": [("spec.weight", 0, "weight 0"), ("spec.weight", "x", "weight not an integer"),
              ("spec.capability", {"nvidia.com/gpu": "-1"}, "negative capability"),
              ("spec.parent", "root", "parent queue (accepted)")],
    "VolcanoJob": [("spec.minAvailable", -1, "negative minAvailable"),
                   ("spec.tasks", [], "no tasks (accepted by the CRD)"),
                   ("spec.tasks[0].replicas", -1, "negative replicas"),
                   ("spec.policies", [{"event": "PodEvicted", "action": "Sideways"}], "unknown policy action"),
                   ("spec.maxRetry", -1, "negative maxRetry")],
    "PodGroup": [("spec.minMember", -1, "negative minMember"), ("spec.minMember", "x", "minMember not an integer"),
                 ("spec.networkTopology", {"mode": "hard", "highestTierAllowed": 2}, "topology (accepted)"),
                 ("spec.networkTopology", {"mode": "sideways"}, "unknown topology mode")],
    "HyperNode": [("spec.tier", "x", "tier not an integer"),
                  ("spec.members", [{"type": "Rack"}], "unknown member type"),
                  ("spec.members", [{"type": "Node", "selector": {}}], "selector with no match")],
    "RayJob": [("spec.entrypoint", 1, "entrypoint not a string"),
               ("spec.shutdownAfterJobFinishes", "yes", "boolean as a string"),
               ("spec.rayClusterSpec.workerGroupSpecs[0].replicas", -1, "negative replicas"),
               ("spec.submissionMode", "Sideways", "unknown submission mode")],
    "Namespace": [("spec.finalizers", ["bad finalizer"], "namespace finalizer invalid")],
    "ConfigMap": [("data", {"bad key!": "x"}, "data key invalid"), ("binaryData", {"a": "not-base64!"},
                                                                     "binary data not base64")],
}


def _stateful() -> list[dict]:
    """Rules that need state: what the object meets when it arrives, or how it leaves."""
    ns = "fidelity-state"
    pods = f"/api/v1/namespaces/{ns}/pods"
    gpu_pod = _set(base("Pod", "gpu"), "spec.containers[0].resources", {"limits": {"nvidia.com/gpu": "1"}})
    gpu_pod["metadata"]["namespace"] = ns
    setup_ns = {"method": "POST", "path": "/api/v1/namespaces", "body": {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}}
    limits = {"method": "POST", "path": f"/api/v1/namespaces/{ns}/limitranges", "body": {
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": ns},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "500m"},
                             "default": {"cpu": "250m", "memory": "256Mi"}}]}}}
    quota = {"method": "POST", "path": f"/api/v1/namespaces/{ns}/resourcequotas", "body": {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": ns},
        "spec": {"hard": {"requests.nvidia.com/gpu": "0"}}}}
    return [
        {"source": "hand-written", "kind": "Pod", "rule": "LimitRange max on a pod above it", "setup": [
            setup_ns, limits], "request": {"method": "POST", "path": pods + DRY, "body": _set(
                gpu_pod, "spec.containers[0].resources", {"limits": {"cpu": "1"}})}},
        {"source": "hand-written", "kind": "Pod", "rule": "LimitRange defaults filled in", "setup": [
            setup_ns, limits], "request": {"method": "POST", "path": pods + DRY, "body": _set(
                gpu_pod, "spec.containers[0].resources", {})}},
        {"source": "hand-written", "kind": "Pod", "rule": "ResourceQuota exceeded", "setup": [setup_ns, quota],
         "request": {"method": "POST", "path": pods + DRY, "body": gpu_pod}},
        {"source": "hand-written", "kind": "Namespace", "rule": "a deleted namespace is Terminating (with content)",
         "setup": [{**setup_ns, "body": _set(setup_ns["body"], "metadata.name", "fidelity-gone")},
                   {"method": "POST", "path": "/api/v1/namespaces/fidelity-gone/configmaps", "body": {
                       "apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                           "name": "held", "finalizers": ["gpu-portal.io/hold"]}}}],
         "request": {"method": "DELETE", "path": "/api/v1/namespaces/fidelity-gone", "body": None},
         "then": {"method": "GET", "path": "/api/v1/namespaces/fidelity-gone"}},
        {"source": "hand-written", "kind": "ConfigMap", "rule": "create in a Terminating namespace",
         "setup": [], "request": {"method": "POST", "path": "/api/v1/namespaces/fidelity-gone/configmaps",
                                  "body": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}}},
    ]


def hand_written() -> list[dict]:
    cases = []
    for kind in KINDS:
        cases += _generic_cases(kind)
        cases += _spec(kind, SPECIFIC.get(kind, []))
    return cases + _stateful()


def case_id(case: dict) -> str:
    return json.dumps([case["kind"], case["rule"], case["request"]["method"]])
