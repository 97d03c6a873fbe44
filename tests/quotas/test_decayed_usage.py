"""Kueue's admission fair sharing as the portal meets it: the team's weight written on its LocalQueue, the decayed
usage Kueue reports in the LocalQueue's status recorded on the team's namespace row through the backend seam, and
shown beside the weight on the capacity page. On the sandbox's Kueue, validated against the upstream CRDs."""

import pytest
import yaml
from django.urls import reverse

from backends import backend_for
from quotas.usage import quota_status_from
from sandbox import Sandbox
from tenants import services as tenant_services
from tenants.models import TeamNamespace
from tests.factories import PlatformAdminFactory
from tests.permissions import request_as
from tests.quotas.test_reconcile import KUEUE, get, grant, reconcile_all, setup_cluster

pytestmark = pytest.mark.django_db
T0 = 1_800_000_000.0


@pytest.fixture
def sim(crds_dir):
    with Sandbox(crd_dirs=[crds_dir], builtin_custom_kinds=True, simulate=True, tick=None,
                 simulation={"duration": 10**6, "startup": 0}) as sb:
        yield sb


def kueue_configuration(sb, half_life: str):
    kind = sb.store.kind("v1", "Namespace")
    sb.store.create(kind, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})
    sb.store.create(sb.store.kind("v1", "ConfigMap"), {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": yaml.safe_dump({
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "admissionFairSharing": {"usageHalfLifeTime": half_life, "usageSamplingInterval": "5m"}})}})


def gpu_job(sb, namespace, gpus):
    template = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    sb.store.create(sb.store.kind("batch/v1", "Job"), {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"parallelism": 1, "completions": 1, "template": template}})


@pytest.mark.parametrize(("half_life", "shown", "warned"), [("1h", "2.00", False), ("0s", "0.00", True)])
def test_decayed_usage_reaches_the_capacity_page(client, sim, half_life, shown, warned):
    """4 GPUs held for an hour, sampled every 5 minutes with a half-life of 1 h: 4 × (1 − 0.5) = 2 GPUs of decayed
    usage; with a half-life of 0 Kueue keeps nothing and the page warns that the feature is silently off."""
    kueue_configuration(sim, half_life)
    cluster, team, row, h100, _ = setup_cluster(sim.url, "kueue")
    grant(team, h100, 8, 0)
    tenant_services.team_set_fair_share_weight(actor=PlatformAdminFactory(), team=team, weight=3)
    reconcile_all(cluster)
    assert get(cluster, KUEUE, "LocalQueue", "default", team.namespace)["spec"]["fairSharing"] == {"weight": "3"}
    gpu_job(sim, team.namespace, 4)
    for t in range(0, 3601, 300):  # seen (and admitted) at 0, then twelve samples
        sim.simulator.step(T0 + t)
    reconcile_all(cluster)  # reads the team's objects back and records what their status says
    decayed = TeamNamespace.objects.get(pk=row.pk).quota_status["decayed"]
    assert decayed["updated"] == "2027-01-15T09:00:00Z"
    assert decayed["consumed"] == ({"nvidia.com/gpu": pytest.approx(2.0, abs=1e-6)} if half_life == "1h" else {})
    body = request_as(client, PlatformAdminFactory(), reverse("quotas:capacity")).content.decode()
    team_row = body.split(f'data-team="{team.slug}"')[1].split("</tr>")[0]
    assert f">{shown}</span>" in team_row
    assert ("remembers nothing" in body) is warned


def test_volcano_keeps_no_decayed_usage():
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "nlp"},
             "status": {"allocated": {"nvidia.com/gpu": "2"}}}
    assert backend_for("volcano").decayed_usage([queue]) is None
    assert "decayed" not in quota_status_from([queue])
    local_queue = {"kind": "LocalQueue", "status": {"fairSharing": {"admissionFairSharingStatus": {
        "consumedResources": {"nvidia.com/gpu": "1500m", "cpu": "250m"}, "lastUpdate": "2027-01-15T09:00:00Z"}}}}
    assert quota_status_from([local_queue])["decayed"] == {"consumed": {"cpu": 0.25, "nvidia.com/gpu": 1.5},
                                                           "updated": "2027-01-15T09:00:00Z"}
    assert "decayed" not in quota_status_from([{"kind": "LocalQueue", "status": {}}])
