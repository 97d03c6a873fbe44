"""The disagreements left on purpose, by class, each with why: the report counts them under these headings, and
anything no class claims is listed as not yet explained."""

from __future__ import annotations

import json

KUEUE_KINDS = {"ClusterQueue", "ResourceFlavor", "LocalQueue", "Cohort", "Topology", "WorkloadPriorityClass"}
VOLCANO_KINDS = {"Queue", "VolcanoJob", "PodGroup", "HyperNode"}


def _text(row: dict) -> str:
    return json.dumps([row["real"], row["sandbox"]])


def _kueue(row: dict) -> bool:
    text = _text(row)
    return row["kind"] in KUEUE_KINDS and ("kueue.x-k8s.io/resource-in-use" in text or "admission webhook" in text)


def _volcano_mutators(row: dict) -> bool:
    """What Volcano's mutators set before the schema is checked (a Queue's weight 0 made 1, a task's minAvailable
    copied from its replicas): the reference, without them, judges the object as sent."""
    real, sandbox = json.dumps(row["real"]), json.dumps(row["sandbox"])
    return row["kind"] in VOLCANO_KINDS and (("spec.weight" in real and "spec.weight" not in sandbox)
                                             or ("minAvailable" in sandbox and "minAvailable" not in real))


def _volcano(row: dict) -> bool:
    return "volcano.sh\\\" denied the request" in _text(row) or (
        row["kind"] in VOLCANO_KINDS | {"Job"} and "admission webhook" in _text(row)) or _volcano_mutators(row)


def _pod_admission(row: dict) -> bool:
    return row["kind"] == "Pod" and any(word in _text(row) for word in (
        "kube-api-access", "PriorityClass with name", "limit-ranger", "maximum cpu usage per Container"))


CLASSES = [
    ("Kueue's webhooks and finalizer", _kueue,
     "the sandbox plays Kueue v0.19.2's webhooks (the resource-in-use finalizer its ClusterQueue and ResourceFlavor "
     "webhooks add, their validators and the Cohort's); the reference here is kube-apiserver with Kueue's CRDs and "
     "no Kueue, so it accepts what Kueue would refuse and adds no finalizer. Against Kueue itself these cases "
     "agree: bench/FIDELITY_CONTROLLERS.md (`--controllers`)."),
    ("Volcano's webhooks", _volcano,
     "the sandbox plays Volcano v1.15.1's admission webhooks (a job's or a PodGroup's queue must exist, a queue's "
     "parent must exist, a capability may not be negative); the reference runs no Volcano, and each corpus request "
     "is replayed alone, without the Queue the portal creates first. Against Volcano itself all but two agree "
     "(bench/FIDELITY_CONTROLLERS.md, `--controllers`: a message worded by another release, one built from Go "
     "maps)."),
    ("Pod admission plugins", _pod_admission,
     "admission the portal never meets, as it creates no Pod (the Job, Volcano and KubeRay controllers do): the "
     "ServiceAccount token volume (with a random name), DefaultTolerationSeconds, Priority, LimitRanger's annotation "
     "and refusal, the QoS class; the sandbox's in-process kubelet writes pods its own way."),
    ("DRA request validation", lambda row: row["kind"] == "ResourceClaimTemplate",
     "of resource.k8s.io/v1 device requests, the CEL compilation of a selector (cel-go's syntax errors, word for "
     "word) and how an empty request list is stored (null, its managed field kept) are not transcribed; the portal "
     "generates its claim templates valid, with requests, and both accept them alike."),
]


def classify(row: dict) -> str | None:
    for name, matches, _ in CLASSES:
        if matches(row):
            return name
    return None


def reasons() -> dict[str, str]:
    return {name: reason for name, _, reason in CLASSES}
