"""deploy/kustomize/monitoring: the ServiceMonitor scrapes the web Service's port at /metrics, the alerting rules
are valid PromQL (promtool), and every metric they name is one /metrics exports."""

import re
import shutil
import subprocess

import pytest
import yaml

from tests.portal.test_deployment import ROOT, _files, by_kind
from tests.requires import unavailable

MONITORING = ROOT / "deploy" / "kustomize" / "monitoring"


def _docs() -> dict[str, dict]:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    docs = [yaml.safe_load((MONITORING / name).read_text()) for name in kustomization["resources"]]
    return {doc["kind"]: doc for doc in docs}


def test_the_service_monitor_scrapes_the_web_service():
    monitor = _docs()["ServiceMonitor"]
    service = by_kind(_files(), "Service")[0]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    labels = service["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["path"] == "/metrics" and endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_the_alerting_rules_are_valid_and_name_exported_metrics(tmp_path):
    rules = _docs()["PrometheusRule"]["spec"]
    promtool = shutil.which("promtool")
    if promtool is None:
        unavailable("promtool (Debian's prometheus) is not installed: the rules were not checked")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    exported = set(re.findall(r'"(gpu_portal_\w+)"', (ROOT / "portal" / "metrics.py").read_text()
                              + (ROOT / "composition" / "metrics.py").read_text()))
    named = {name for group in rules["groups"] for rule in group["rules"]
             for name in re.findall(r"gpu_portal_\w+", rule["expr"])}
    suffixes = ("_total", "_bucket", "_count", "_sum")
    assert named and all(any(name == e or name == e + s for e in exported for s in suffixes) or name in exported
                         for name in named), named - exported


@pytest.mark.parametrize("kind", ["ServiceMonitor", "PrometheusRule"])
def test_the_monitoring_objects_are_the_operators_kinds(kind):
    assert _docs()[kind]["apiVersion"] == "monitoring.coreos.com/v1"
