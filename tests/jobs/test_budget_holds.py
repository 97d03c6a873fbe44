"""Hard budgets and allowances held in the scheduler, end to end on the sandbox: a team over its allowance submits
through the API and with kubectl to its own queue; both jobs wait with the reason; a platform admin's override
admits one; the window rolling on (the clock moved) releases the rest. Kueue holds them with the portal's
AdmissionCheck; Volcano with the team's Queue closed (kubectl is refused at the door, the portal keeps its own
job and sends it when the queue reopens)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import yaml
from django.utils import timezone
from rest_framework.test import APIClient

from billing import budgets, enforce
from billing.choices import BudgetMode
from billing.models import BudgetHold, UsageHour
from billing.pricing import current_month, floor_hour
from jobs import selectors as job_selectors
from jobs import sync as job_sync
from jobs.choices import JobState, WaitReason
from jobs.models import Job, JobWait
from quotas import services as quota_services
from sandbox.tests.kubectl import kubectl_for
from tenants.choices import Role
from tenants.models import TeamWebhook, WebhookDelivery
from tests.api.world import token_for
from tests.factories import GpuFlavorFactory, MembershipFactory, PlatformAdminFactory, RateCardFactory
from tests.jobs.conftest import build_world, reconcile_cluster, step

pytestmark = pytest.mark.django_db
V1 = "/api/v1"
KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"


@pytest.fixture
def kubectl(tmp_path, simulating_sandbox):
    return kubectl_for(simulating_sandbox, tmp_path)


def api_as(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(user)}")
    return client


def batch_job(name: str, queue: str, namespace: str, flavor: str, gpus: int) -> str:
    return yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never", "nodeSelector": {"gpu-portal.io/flavor": flavor}, "containers": [
                {"name": "main", "image": "ghcr.io/acme/train:1",
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)},
                               "requests": {"cpu": "1", "memory": "1Gi"}}}]}}}})


def over_allowance(world, now):
    """Allowances of 8 GPU-hours a day on h100 and a100; 10 used of each an hour ago."""
    admin = world["admin"]
    for flavor in (world["flavor"], world["a100"]):
        UsageHour.objects.create(team=world["team"], flavor=flavor, cluster=world["cluster"], namespace="nlp",
                                 hour=floor_hour(now) - timedelta(hours=1), allocated_gpu_hours=Decimal(10),
                                 used_gpu_hours=Decimal(10))
        budgets.allowance_set(actor=admin, team=world["team"], flavor=flavor, gpu_hours=8, window_days=1)


def kueue_world(url):
    world = build_world(url, "kueue", guaranteed=16, burst=0)
    world["admin"] = PlatformAdminFactory()
    world["a100"] = GpuFlavorFactory(cluster=world["cluster"], name="a100", gpus_per_node=8, capacity=64)
    quota_services.quota_set(actor=world["admin"], team=world["team"], flavor=world["a100"], guaranteed=8, burst=0,
                             cpu_cores=64, memory_gib=512)
    MembershipFactory(team=world["team"], role=Role.ADMIN, user__email="ada@example.com")
    return world


def workload(sb, name):
    rt = sb.store.kind(KUEUE, "Workload")
    found = [w for w in sb.store.list(rt, "nlp")["items"] if w["metadata"]["ownerReferences"][0]["name"] == name]
    return found[0]


def check_of(sb, name):
    return next(c for c in workload(sb, name)["status"]["admissionChecks"] if c["name"] == "gpu-portal-budget")


def test_kueue_holds_api_and_kubectl_jobs_until_an_override_and_the_window_roll(
        simulating_sandbox, run_on_commit, kubectl, mailoutbox):
    sb = simulating_sandbox
    now = timezone.now()
    world = kueue_world(sb.url)
    with run_on_commit():
        over_allowance(world, now)
    reconcile_cluster(world["cluster"])  # the team's ClusterQueue now lists the portal's check
    queue = sb.store.get(sb.store.kind(KUEUE, "ClusterQueue"), None, "nlp")
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "gpu-portal-budget"}]}
    assert enforce.budget_enforce(now=now)["held"] == 1
    assert len(mailoutbox) == 1 and "held by the budget" in mailoutbox[0].subject
    TeamWebhook.objects.create(team=world["team"], url="https://hooks.example.com/gpu", secret="s3cret")
    check = sb.store.get(sb.store.kind(KUEUE, "AdmissionCheck"), None, "gpu-portal-budget")
    assert check["spec"] == {"controllerName": "gpu-portal.io/budget"}
    assert [c["type"] for c in check["status"]["conditions"] if c["status"] == "True"] == ["Active"]

    with run_on_commit():
        response = api_as(world["member"]).post(f"{V1}/jobs/", {
            "team": "nlp", "kind": "batch", "name": "api-train", "flavor": "h100", "image": "ghcr.io/acme/train:2",
            "command": ["python", "train.py"], "workers": 1, "gpus_per_worker": 8}, format="json")
    assert response.status_code == 201, response.content
    api_job = Job.objects.get(pk=response.json()["id"])
    created = kubectl("create", "-f", "-", stdin=batch_job("by-hand", "default", "nlp", "a100", 8))
    assert created.returncode == 0, created.stderr

    step(sb, 0)  # both get quota, and wait for the check
    enforce.budget_enforce(now=now)
    step(sb, 1)
    with run_on_commit():
        job_sync.job_status_sync(cluster=world["cluster"])
    api_job.refresh_from_db()
    assert api_job.state == JobState.QUEUED
    assert api_job.state_message.startswith("Held by the budget's GPU-hour allowance: nlp used 10 of its 8 h100 "
                                            "GPU-hours in the last 1 days, 2 over.")
    assert "A platform admin can raise the allowance or grant an override." in api_job.state_message
    assert JobWait.objects.get(job=api_job, ended_at__isnull=True).reason == WaitReason.BUDGET
    assert "Held by the budget" in job_selectors.why_waiting(job=api_job)
    # Its owner is told at once: by e-mail (the submitter asked for mail) and through the team's webhook.
    told = [m for m in mailoutbox if m.subject == "Job api-train held by the budget"]
    assert len(told) == 1 and told[0].to == [world["member"].email] and "2 over" in told[0].body
    held = WebhookDelivery.objects.get(team=world["team"], event="job.held")
    assert held.payload["job"]["id"] == api_job.pk and held.payload["reason"].startswith("Held by the budget")
    by_hand = check_of(sb, "by-hand")
    assert by_hand["state"] == "Pending" and "8 a100 GPU-hours" in by_hand["message"]
    assert workload(sb, "by-hand")["status"]["admission"]["clusterQueue"] == "nlp"  # quota reserved, held
    assert sb.store.get(sb.store.kind("batch/v1", "Job"), "nlp", "by-hand")["spec"]["suspend"] is True

    with run_on_commit():  # 4 more h100 GPU-hours: h100 is within, a100 still held
        budgets.budget_override_grant(actor=world["admin"], team=world["team"], flavor=world["flavor"],
                                      extra_gpu_hours=4, expires_at=now + timedelta(hours=6), reason="deadline")
    enforce.budget_enforce(now=now)
    step(sb, 2)
    job_sync.job_status_sync(cluster=world["cluster"])
    assert Job.objects.get(pk=api_job.pk).state == JobState.ADMITTED
    assert check_of(sb, "by-hand")["state"] == "Pending"
    assert sum(1 for m in mailoutbox if m.subject.endswith("new GPU jobs are held by the budget")) == 1  # one hold

    later = now + timedelta(days=1, hours=1)  # the hours used have left the one-day window
    counts = enforce.budget_enforce(now=later)
    assert (counts["held"], counts["closed"]) == (0, 1)
    step(sb, 3)
    assert check_of(sb, "by-hand")["state"] == "Ready"
    assert sb.store.get(sb.store.kind("batch/v1", "Job"), "nlp", "by-hand")["spec"]["suspend"] is False
    hold = BudgetHold.objects.get(team=world["team"])
    assert hold.ended_at == later
    assert enforce.budget_enforce(now=later)["writes"] == 0  # nothing changed: nothing written


def vcjob(name: str, queue: str, gpus: int) -> str:
    return yaml.safe_dump({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": "nlp"},
        "spec": {"schedulerName": "volcano", "queue": queue, "minAvailable": 1, "tasks": [{
            "name": "main", "replicas": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "ghcr.io/acme/train:1",
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)},
                               "requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]}})


def queue_state(sb, name="nlp"):
    return (sb.store.get(sb.store.kind(VOLCANO, "Queue"), None, name).get("status") or {}).get("state")


def submit(world, name):
    with_commit = api_as(world["member"]).post(f"{V1}/jobs/", {
        "team": "nlp", "kind": "batch", "name": name, "flavor": "h100", "image": "ghcr.io/acme/train:2",
        "command": ["python", "train.py"], "workers": 1, "gpus_per_worker": 4}, format="json")
    assert with_commit.status_code == 201, with_commit.content
    return Job.objects.get(pk=with_commit.json()["id"])


def test_volcano_closes_the_queue_and_the_portal_keeps_its_jobs_until_the_hold_lifts(
        simulating_sandbox, run_on_commit, kubectl, mailoutbox):
    """A hard budget of 100 USD, 200 spent (20 GPU-hours at 10.00 this month)."""
    sb = simulating_sandbox
    now = timezone.now()
    month = current_month(now)
    world = build_world(sb.url, "volcano", guaranteed=16, burst=0)
    admin = PlatformAdminFactory()
    team_admin = MembershipFactory(team=world["team"], role=Role.ADMIN, user__email="ada@example.com").user
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    RateCardFactory(flavor=world["flavor"], price_per_gpu_hour=Decimal("10.00"), effective_from=start)
    UsageHour.objects.create(team=world["team"], flavor=world["flavor"], cluster=world["cluster"], namespace="nlp",
                             hour=start, allocated_gpu_hours=Decimal(20), used_gpu_hours=Decimal(20))
    with run_on_commit():
        budgets.budget_set(actor=team_admin, team=world["team"], month=month, amount=100, mode=BudgetMode.HOLD)
    assert queue_state(sb) == "Closed"  # the pass on commit closed it
    assert len(mailoutbox) == 1

    with run_on_commit():
        held = submit(world, "api-train")
    held.refresh_from_db()
    assert (held.state, held.observed_generation) == (JobState.PENDING, 0)  # kept in the portal, nothing sent
    assert held.state_message.startswith("Held by the budget: nlp has spent 200.00 USD of its 100.00 USD hard "
                                         f"budget for {month:%B %Y}, 100.00 USD over.")
    assert "A team admin can raise the budget" in held.state_message
    assert JobWait.objects.get(job=held, ended_at__isnull=True).reason == WaitReason.BUDGET
    refused = kubectl("create", "-f", "-", stdin=vcjob("by-hand", "nlp", 4))
    assert refused.returncode != 0
    assert "can only submit job to queue with state `Open`, queue `nlp` status is `Closed`" in refused.stderr

    with run_on_commit():  # every hold lifted for an hour: the queue reopens and the portal sends its job
        budgets.budget_override_grant(actor=admin, team=world["team"], expires_at=now + timedelta(hours=1),
                                      reason="release before the demo")
    assert queue_state(sb) == "Open"
    held.refresh_from_db()
    assert held.state == JobState.QUEUED and held.observed_generation > 0
    step(sb, 0)
    job_sync.job_status_sync(cluster=world["cluster"])
    assert Job.objects.get(pk=held.pk).state == JobState.ADMITTED

    expired = now + timedelta(hours=2)  # the override is over, the month's budget still spent
    with run_on_commit():
        enforce.budget_enforce(now=expired)
    assert queue_state(sb) == "Closed"
    with run_on_commit():
        second = submit(world, "api-again")
    assert Job.objects.get(pk=second.pk).state == JobState.PENDING
    holds = [m.subject for m in mailoutbox if m.subject.endswith("new GPU jobs are held by the budget")]
    assert len(holds) == 2  # a new hold, a new e-mail to the team's admins
    assert [m.subject for m in mailoutbox if m.subject.startswith("Job ")] == [
        "Job api-train held by the budget", "Job api-again held by the budget"]  # and each owner, once
    next_month = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, 1, tzinfo=UTC)
    with run_on_commit():
        counts = enforce.budget_enforce(now=next_month)  # a new month: no hard budget spent
    assert (counts["closed"], counts["released_jobs"]) == (1, 1)
    assert queue_state(sb) == "Open"
    assert Job.objects.get(pk=second.pk).state == JobState.QUEUED
    assert kubectl("create", "-f", "-", stdin=vcjob("by-hand", "nlp", 4)).returncode == 0
    # A reopening that did not reach the cluster (closed again here) is repaired by a later pass.
    rt = sb.store.kind(VOLCANO, "Queue")
    sb.store.patch(rt, None, "nlp", {"status": {"state": "Closed"}}, "merge", subresource="status")
    enforce.budget_enforce(now=next_month + timedelta(minutes=1))
    assert queue_state(sb) == "Open"
