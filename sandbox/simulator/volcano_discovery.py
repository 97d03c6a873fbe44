"""Volcano's HyperNode label discoverer: the controller builds HyperNodes from node labels itself, so nobody writes
them by hand. The sandbox plays it whenever Nodes, HyperNodes or its configuration change.

Sources (volcano-sh/volcano):
- The configuration is the `volcano-controller.conf` key of the ConfigMap `volcano-controller-configmap` in
  `volcano-system` (pkg/controllers/hypernode/config/loader.go; the chart's templates/controllers.yaml names it
  `<release>-controller-configmap`): `networkTopologyDiscovery`, a list of sources; the `label` one, when
  enabled, has `config.networkTopologyTypes`, per type name (at most 20 characters) its node labels from the
  broadest to kubernetes.io/hostname (pkg/controllers/hypernode/api/types.go, example.yaml).
- The last label is the node itself and is dropped; the one before it makes tier 1, and so up
  (discovery/label/label.go parseCfg). A type with a repeated label is ignored.
- Each (label, value) a node carries is one HyperNode, its members the nodes (tier 1) or the HyperNodes below
  it (higher tiers) by exactMatch, sorted (generateHyperNodeInfo, utils.BuildMembers); spec.tierName is the label,
  and its labels are that label's value and volcano.sh/network-topology-source: label.
- A HyperNode's name is kept once made (found by its label and source); a new one is
  hypernode-<type>-tier<N>-<5 random characters> (buildHyperNodeName). HyperNodes of the label source that the
  nodes no longer describe are deleted (hypernode_controller.go reconcileTopology).
- Turning label discovery off, or a configuration that does not load, only stops the discoverer: the HyperNodes
  it made stay (discovery/manager.go handleRemovedSources, stopSingleDiscoverer).
"""

from __future__ import annotations

import random

import yaml

from .model import ALPHABET

TOPOLOGY = "topology.volcano.sh/v1alpha1"
CONFIG_NAMESPACE, CONFIG_NAME, CONFIG_KEY = "volcano-system", "volcano-controller-configmap", "volcano-controller.conf"
SOURCE_LABEL = "volcano.sh/network-topology-source"
MAX_TYPE_NAME = 20


def label_types(config_text: str) -> dict[str, list[str]] | None:
    """Per network topology type, its HyperNode labels from tier 1 up; None when label discovery is off (no or
    unreadable configuration, or the label source not enabled)."""
    try:
        config = yaml.safe_load(config_text) or {}
    except yaml.YAMLError:
        return None
    entries = config.get("networkTopologyDiscovery") if isinstance(config, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("source") == "label" and entry.get("enabled") is True:
            types = ((entry.get("config") or {}).get("networkTopologyTypes") or {})
            record = {}
            for name, levels in types.items() if isinstance(types, dict) else []:
                labels = [level.get("nodeLabel") for level in levels or [] if isinstance(level, dict)]
                if len(str(name)) > MAX_TYPE_NAME or len(set(labels)) != len(labels):
                    continue
                record[str(name)] = list(reversed(labels[:-1]))
            return record
    return None


def _clean(text: str) -> str:
    return "".join(c.lower() if c.isalpha() else c if c.isdigit() or c in ".-" else "-" for c in text)


def discovered(types: dict[str, list[str]], nodes: list[dict], existing: list[dict]) -> dict[str, dict]:
    """The HyperNodes the nodes' labels describe: name -> {tier, tierName, labels, members}."""
    found: dict[str, dict] = {}
    named: dict[tuple[str, str], str] = {}
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        labels = node["metadata"].get("labels") or {}
        for type_name, keys in sorted(types.items()):
            member = node["metadata"]["name"]
            for tier, key in enumerate(keys, start=1):
                if key not in labels:
                    break
                value = labels[key]
                name = named.get((key, value)) or _name(type_name, key, value, tier, existing, found)
                named[(key, value)] = name
                entry = found.setdefault(name, {"tier": tier, "tierName": key, "labels": {key: value},
                                                "members": set()})
                entry["members"].add(member)
                member = name
    return found


def _name(type_name: str, key: str, value: str, tier: int, existing: list[dict], taken: dict) -> str:
    prefix = f"hypernode-{_clean(type_name)}-tier{tier}"
    for hypernode in sorted(existing, key=lambda h: h["metadata"]["name"]):
        labels = hypernode["metadata"].get("labels") or {}
        if labels.get(key) == value and labels.get(SOURCE_LABEL) == "label" \
                and hypernode["metadata"]["name"].startswith(prefix):
            return hypernode["metadata"]["name"]
    names = {h["metadata"]["name"] for h in existing} | set(taken)
    chooser = random.Random(f"{type_name}/{key}={value}")  # upstream's suffix is random; stable here
    while True:
        name = f"{prefix}-{''.join(chooser.choices(ALPHABET, k=5))}"
        if name not in names:
            return name


def manifest(name: str, entry: dict) -> dict:
    member_type = "Node" if entry["tier"] == 1 else "HyperNode"
    return {"apiVersion": TOPOLOGY, "kind": "HyperNode",
            "metadata": {"name": name, "labels": {SOURCE_LABEL: "label", **entry["labels"]}},
            "spec": {"tier": entry["tier"], "tierName": entry["tierName"], "members": [
                {"type": member_type, "selector": {"exactMatch": {"name": member}}}
                for member in sorted(entry["members"])]}}


def reconcile(objects) -> int:
    """Create, update and delete the label source's HyperNodes to match the nodes; answers the writes made."""
    if not objects.installed(TOPOLOGY, "HyperNode"):
        return 0
    config = objects.get("v1", "ConfigMap", CONFIG_NAMESPACE, CONFIG_NAME)
    types = label_types(((config or {}).get("data") or {}).get(CONFIG_KEY, ""))
    if types is None:  # no discoverer runs: nothing is made, updated or deleted
        return 0
    existing = [h for h in objects.list(TOPOLOGY, "HyperNode")
                if (h["metadata"].get("labels") or {}).get(SOURCE_LABEL) == "label"]
    want = {name: manifest(name, entry)
            for name, entry in discovered(types, objects.list("v1", "Node"), existing).items()}
    writes = 0
    for hypernode in existing:
        name = hypernode["metadata"]["name"]
        if name not in want:
            objects.delete(TOPOLOGY, "HyperNode", None, name)
            writes += 1
        elif hypernode.get("spec") != want[name]["spec"] or any(
                (hypernode["metadata"].get("labels") or {}).get(k) != v
                for k, v in want[name]["metadata"]["labels"].items()):
            objects.patch(TOPOLOGY, "HyperNode", None, name,
                          {"metadata": {"labels": want[name]["metadata"]["labels"]}, "spec": want[name]["spec"]})
            writes += 1
    for name, body in want.items():
        if name not in {h["metadata"]["name"] for h in existing}:
            objects.create(body)
            writes += 1
    return writes
