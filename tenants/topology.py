"""A cluster's topology levels: named node labels from the broadest domain to the narrowest (block, rack, host).

They become a Kueue Topology (spec.levels[].nodeLabel; kueue
config/components/crd/bases/kueue.x-k8s.io_topologies.yaml: 1 to 16 unique labels, kubernetes.io/hostname only as
the lowest) or Volcano HyperNode tiers (tier 1 is the narrowest group of nodes; volcano
staging/src/volcano.sh/apis/pkg/apis/topology/v1alpha1/hypernode_types.go).
"""

import re

import yaml
from django.core.exceptions import ValidationError

HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_LEVELS = 16
# A qualified label key, as the Topology CRD's nodeLabel pattern has it.
LABEL_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
LEVEL_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def is_label_key(key) -> bool:
    """IsQualifiedName (k8s.io/apimachinery pkg/util/validation): optional DNS subdomain prefix, name part ≤ 63."""
    return isinstance(key, str) and bool(LABEL_KEY_RE.match(key)) and len(key.split("/")[-1]) <= 63 \
        and len(key.split("/")[0]) <= 253


def is_label_value(value) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(LABEL_VALUE_RE.match(value))


def toleration_problem(tol: dict) -> str:
    """What kube-apiserver's ValidateTolerations (pkg/apis/core/validation/validation.go) would refuse, or ''."""
    key, op, value, effect = (tol.get(k) or "" for k in ("key", "operator", "value", "effect"))
    if key and not is_label_key(key):
        return f"key {key!r} is not a label key"
    if not key and op != "Exists":
        return "operator must be Exists when key is empty"
    if op not in ("", "Equal", "Exists"):
        return f"operator {op!r} is not Equal or Exists"
    if op == "Exists" and value:
        return "value must be empty when operator is Exists"
    if not is_label_value(value):
        return f"value {value!r} is not a label value"
    if effect and effect not in TAINT_EFFECTS:
        return f"effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)}"
    if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
        return "tolerationSeconds needs effect NoExecute"
    return ""


def validate_topology_levels(levels) -> None:
    if not isinstance(levels, list) or not all(isinstance(level, dict) for level in levels):
        raise ValidationError("A list of levels, each {\"name\": ..., \"node_label\": ...}, broadest first.")
    if len(levels) > MAX_LEVELS:
        raise ValidationError(f"At most {MAX_LEVELS} levels (Kueue's Topology limit).")
    names, labels = [], []
    for level in levels:
        name, label = level.get("name"), level.get("node_label")
        if set(level) - {"name", "node_label"}:
            raise ValidationError("A level has only a name and a node_label.")
        if not isinstance(name, str) or not LEVEL_NAME_RE.match(name) or len(name) > 63:
            raise ValidationError(f"Level name {name!r}: lowercase letters, digits and '-' (e.g. rack).")
        if not isinstance(label, str) or not LABEL_KEY_RE.match(label) or len(label) > 316:
            raise ValidationError(f"Node label {label!r} is not a label key (e.g. topology.example.com/rack).")
        names.append(name)
        labels.append(label)
    if len(set(names)) != len(names) or len(set(labels)) != len(labels):
        raise ValidationError("Each level's name and node label must be unique.")
    if HOSTNAME_LABEL in labels[:-1]:
        raise ValidationError(f"{HOSTNAME_LABEL} can only be the lowest (last) level.")


def level_names(levels) -> list[str]:
    return [level["name"] for level in levels or []]


def level_label(levels, name: str) -> str:
    """The node label of the named level; '' when the cluster has no such level."""
    return next((level["node_label"] for level in levels or [] if level["name"] == name), "")


# Volcano builds HyperNodes from node labels itself (volcano pkg/controllers/hypernode/discovery/label/
# label.go), configured in the controller's ConfigMap (config/loader.go: key volcano-controller.conf; the chart
# names the ConfigMap <release>-controller-configmap in the release's namespace).
VOLCANO_CONFIG_NAMESPACE, VOLCANO_CONFIG_NAME = "volcano-system", "volcano-controller-configmap"
VOLCANO_CONFIG_KEY = "volcano-controller.conf"
VOLCANO_TOPOLOGY_TYPE = "gpu-portal"  # a network topology type name: at most 20 characters
# The label the discoverer puts on the HyperNodes it makes, beside its level's node label and value.
VOLCANO_SOURCE_LABEL = "volcano.sh/network-topology-source"


def volcano_discovery_config(levels) -> str:
    """The controller configuration that makes Volcano's label discoverer build the cluster's HyperNodes from these
    levels: the labels broadest first, ending with the node itself (the discoverer drops the last label as the
    node's own, so kubernetes.io/hostname closes the list even when it is not one of the levels)."""
    labels = [level["node_label"] for level in levels or []]
    if labels and labels[-1] != HOSTNAME_LABEL:
        labels.append(HOSTNAME_LABEL)
    config = {"networkTopologyDiscovery": [{"source": "label", "enabled": True, "config": {
        "networkTopologyTypes": {VOLCANO_TOPOLOGY_TYPE: [{"nodeLabel": label} for label in labels]}}}]}
    return yaml.safe_dump(config, sort_keys=False)
