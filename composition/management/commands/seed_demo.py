"""Demo data: two sandbox clusters (Kueue and Volcano), GPU flavors (whole, MIG slices, MPS and time-sliced shares,
DRA devices), teams and users.

Idempotent: running it again changes nothing, and it starts on whatever a kept `var/` holds (jobs that have moved on
since are left as they are). It runs the portal's tasks in this process even when REDIS_URL is set, since no worker
need be running yet; the rows it writes are whole either way (the clusters, teams and quotas in one transaction,
each job with its own). The passwords are for the demo only.
"""

import time
import urllib.request
from datetime import timedelta
from decimal import Decimal

from celery import current_app as celery_app  # the project's app (config/), which sits above this layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from billing import budgets as billing_budgets
from billing import metrics
from billing import selectors as billing_selectors
from billing import services as billing_services
from billing.models import RateCard
from composition.demo import placement as demo_placement
from composition.demo import usage as sandbox_usage
from composition.management.commands.seed_usage import history as usage_history
from jobs.choices import JobState
from jobs.models import Job
from quotas import services as quota_services
from quotas.models import Quota, QuotaRequest
from tenants import services
from tenants.choices import Role, Scheduler
from tenants.models import Cluster, GpuFlavor, Membership, PriorityTier, Team

DEMO_PASSWORD = "demo-gpu-portal"
IDLE_JOB = "llama-finetune"  # a running demo job shown as holding its GPUs idle
IDLE_UTILISATION = 0.02


class _IdleJobSource:
    """The demo's usage source, plus one job whose GPUs were held but barely used in every hour asked about."""

    def __init__(self, base: metrics.MetricsSource, job: Job, node: str = ""):
        self.base, self.job, self.node = base, job, node

    def hour_usage(self, hour):
        usage = self.base.hour_usage(hour)
        held = float(self.job.total_gpus)
        row = metrics.Usage(allocated_gpu_hours=held, used_gpu_hours=held * IDLE_UTILISATION,
                            memory_gib_hours=held * float(self.job.flavor.memory_gb) * 0.2, energy_kwh=held * 0.1)
        namespace = self.job.team.namespace
        for measured in usage.node_usage((namespace, metrics.ksm_resource(self.job.flavor.resource_name),
                                          self.job.flavor.gpu_model), self.node):
            measured.add(row)
        usage.job_usage((namespace, str(self.job.pk))).add(
            metrics.Usage(allocated_gpu_hours=held, used_gpu_hours=held * IDLE_UTILISATION))
        return usage

CLUSTERS = [
    {"name": "gpu-east", "display_name": "GPU East (Kueue)", "scheduler": Scheduler.KUEUE, "cohort": "gpu-east"},
    {"name": "gpu-west", "display_name": "GPU West (Volcano)", "scheduler": Scheduler.VOLCANO, "cohort": "root"},
]
# Whole H100s handed out by NVIDIA's DRA driver (the sandbox's `--dra-nodes`), counted by Kueue as the logical resource
# its deviceClassMappings give the class; the shared flavors are the device plugin's MPS and time-slicing replicas.
H100_DRA = dict(name="h100-dra", resource_name="gpu.nvidia.com/devices", gpu_model="NVIDIA H100 80GB HBM3", capacity=16,
                gpus_per_node=8, memory_gb=80, sharing="dra", device_class="gpu.nvidia.com", node_labels={},
                device_selector="device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'")
FLAVORS = {
    "gpu-east": [
        dict(name="h100", resource_name="nvidia.com/gpu", gpu_model="NVIDIA H100 80GB HBM3", capacity=64,
             gpus_per_node=8, memory_gb=80, node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
             tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        dict(name="a100-mig-1g", resource_name="nvidia.com/mig-1g.10gb", gpu_model="NVIDIA A100-SXM4-80GB",
             capacity=56, gpus_per_node=56, memory_gb=10, gpu_fraction=Decimal("0.1429"), sharing="mig",
             node_labels={"nvidia.com/mig.config": "all-1g.10gb"}),
        dict(name="a100-mig-3g", resource_name="nvidia.com/mig-3g.40gb", gpu_model="NVIDIA A100-SXM4-80GB",
             capacity=16, gpus_per_node=16, memory_gb=40, gpu_fraction=Decimal("0.4286"), sharing="mig",
             node_labels={"nvidia.com/mig.config": "all-3g.40gb"}),
        H100_DRA,
        dict(name="h100-mps", resource_name="nvidia.com/gpu.shared", gpu_model="NVIDIA H100 80GB HBM3", capacity=32,
             gpus_per_node=32, memory_gb=80, sharing="mps", replicas=4,
             node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.sharing-strategy": "mps"}),
        demo_placement.SPOT_FLAVOR,
    ],
    "gpu-west": [
        dict(name="a100", resource_name="nvidia.com/gpu", gpu_model="NVIDIA A100-SXM4-80GB", capacity=24,
             gpus_per_node=8, memory_gb=80, node_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        dict(name="l40s", resource_name="nvidia.com/gpu", gpu_model="NVIDIA L40S", capacity=24, gpus_per_node=4,
             memory_gb=48, node_labels={"nvidia.com/gpu.product": "NVIDIA-L40S"}),
        H100_DRA,
        dict(name="l40s-shared", resource_name="nvidia.com/gpu.shared", gpu_model="NVIDIA L40S", capacity=16,
             gpus_per_node=8, memory_gb=48, sharing="time_sliced", replicas=2,
             node_labels={"nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/gpu.sharing-strategy": "time-slicing"}),
    ],
}
TIERS = [
    dict(name="urgent", value=100000, preemption_policy="PreemptLowerPriority", description="Deadlines and incidents"),
    dict(name="standard", value=10000, preemption_policy="PreemptLowerPriority", description="Default for jobs",
         is_default=True),
    dict(name="preemptible", value=1000, preemption_policy="Never", description="Cheap, may be preempted"),
]
DEPARTMENT = dict(slug="ai-research", name="AI Research", cost_center="CC-4000")
TEAMS = [
    dict(slug="ml-research", name="ML Research", cost_center="CC-4100", idp_group="ml-research"),
    dict(slug="nlp", name="Natural Language", cost_center="CC-4200"),
    dict(slug="vision", name="Computer Vision", cost_center="CC-4300"),
    dict(slug="recsys", name="Recommendations", cost_center="CC-5100"),
]
# (cluster, flavor) -> price per GPU-hour; the 1g MIG slice has no card and costs its share of the H100 rate.
# The shared flavors have none either: a share costs its GPU's rate over the replicas. Spot H100s have their own.
RATES = {("gpu-east", "h100"): "4.00", ("gpu-east", "a100-mig-3g"): "0.95", ("gpu-west", "a100"): "2.20",
         ("gpu-west", "l40s"): "1.10", ("gpu-east", "h100-spot"): "1.60", ("gpu-east", "h100-dra"): "4.00",
         ("gpu-west", "h100-dra"): "4.20"}
RATE_CHANGE = (("gpu-east", "h100"), "4.40")  # a week ago, so this month's statement shows both rates
# This month's budget as a share of the team's forecast: below 1 the team is heading over it (banner, alerts).
BUDGET_SHARE = {"nlp": "0.9", "ml-research": "1.3", "vision": "1.6", "recsys": "1.1"}
# username -> (team slug, role)
PEOPLE = {
    "alice": ("ml-research", Role.ADMIN),
    "bob": ("ml-research", Role.MEMBER),
    "carol": ("ml-research", Role.VIEWER),
    "dave": ("nlp", Role.ADMIN),
    "erin": ("nlp", Role.MEMBER),
    "frank": ("vision", Role.ADMIN),
    "grace": ("vision", Role.VIEWER),
    "heidi": ("recsys", Role.ADMIN),
    "ivan": ("recsys", Role.MEMBER),
}


# (team, cluster, flavor, guaranteed, burst, cpu cores, memory GiB): approved grants.
GRANTS = [
    ("ml-research", "gpu-east", "h100", 16, 8, 128, 1024),
    ("ml-research", "gpu-east", "a100-mig-1g", 14, 7, 28, 112),
    ("nlp", "gpu-east", "h100", 24, 8, 192, 1536),
    ("nlp", "gpu-east", "h100-spot", 8, 8, 64, 512),  # may fall back to spot when its H100s are busy
    ("vision", "gpu-east", "a100-mig-3g", 8, 4, 32, 256),
    ("recsys", "gpu-east", "a100-mig-1g", 21, 0, 42, 168),
    ("ml-research", "gpu-west", "a100", 8, 8, 64, 512),
    ("vision", "gpu-west", "l40s", 12, 4, 48, 384),
    ("recsys", "gpu-west", "a100", 16, 0, 128, 1024),
    ("ml-research", "gpu-east", "h100-dra", 4, 4, 32, 256),
    ("nlp", "gpu-east", "h100-mps", 8, 4, 24, 192),  # on Kueue a flavor's jobs take CPU and memory from its own quota
    ("vision", "gpu-west", "h100-dra", 4, 0, 32, 256),
    ("vision", "gpu-west", "l40s-shared", 4, 2, 8, 64),
]
# (requester, team, cluster, flavor, guaranteed, burst, days or None, justification): pending requests.
ASKS = [
    ("bob", "ml-research", "gpu-east", "h100", 32, 8, 14, "32 H100 for 14 days: pre-training the 7B model"),
    ("erin", "nlp", "gpu-west", "l40s", 4, 4, None, "Inference benchmarks for the summarisation service"),
    ("ivan", "recsys", "gpu-east", "a100-mig-3g", 4, 0, 30, "Feature-store embedding refresh this month"),
]
# (requester, team, cluster, flavor, guaranteed, justification, the platform team's reason): a rejected request.
REJECTED = ("frank", "vision", "gpu-east", "h100", 16, "Train the detector on H100s instead of MIG slices",
            "The 3g.40gb slices fit this model; ask again when a run needs more than 40 GB per GPU.")


def _wait_for(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(f"{url}/version", timeout=1).read()
            return
        except OSError as exc:
            if time.monotonic() >= deadline:
                if seconds:
                    raise CommandError(f"{url} did not answer within {seconds:g} s: {exc}") from exc
                return
            time.sleep(0.1)


def _set_password_hash(user, password_hash: str) -> None:
    user.password = password_hash
    user.save(update_fields=["password"])


class Command(BaseCommand):
    help = "Create the demo clusters, flavors, tiers, teams and users (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--kueue-url", default="http://127.0.0.1:8001", help="sandbox API for gpu-east")
        parser.add_argument("--volcano-url", default="http://127.0.0.1:8002", help="sandbox API for gpu-west")
        parser.add_argument("--wait", type=float, default=0, help="seconds to wait for the sandbox clusters to answer")

    def handle(self, *args, kueue_url, volcano_url, wait, **options):
        for url in (kueue_url, volcano_url):
            _wait_for(url, wait)
        eager = celery_app.conf.task_always_eager
        celery_app.conf.task_always_eager = True  # the demo's jobs are applied as they are submitted, worker or not
        try:
            self._seed_all(kueue_url, volcano_url)
        finally:
            celery_app.conf.task_always_eager = eager

    def _seed_all(self, kueue_url, volcano_url):
        self._seed(kueue_url, volcano_url)
        call_command("seed_jobs", stdout=self.stdout, stderr=self.stderr)  # jobs in every state, after the commit
        call_command("seed_usage", stdout=self.stdout, stderr=self.stderr)  # 30 days of synthetic usage
        self._seed_idle_job()
        self._seed_budgets()

    @transaction.atomic
    def _seed(self, kueue_url, volcano_url):
        users = get_user_model().objects
        # Every demo login shares one password, so it is hashed once: each hash is deliberately slow (PBKDF2), and
        # ten of them were a noticeable part of the demo's start.
        password = make_password(DEMO_PASSWORD)
        admin = users.filter(username="admin").first()
        if admin is None:
            admin = users.create_superuser("admin", "admin@example.com", password=None)
            _set_password_hash(admin, password)
        servers = {"gpu-east": kueue_url, "gpu-west": volcano_url}
        for spec in TIERS:
            if not PriorityTier.objects.filter(name=spec["name"]).exists():
                services.priority_tier_save(actor=admin, tier=PriorityTier(**spec))
        for spec in CLUSTERS:
            cluster = Cluster.objects.filter(name=spec["name"]).first()
            if cluster is None:
                cluster = services.cluster_create(actor=admin, connection="sandbox", server=servers[spec["name"]],
                                                  **spec)
            elif cluster.server != servers[spec["name"]]:
                services.cluster_update(actor=admin, cluster=cluster, server=servers[spec["name"]])
            for flavor in FLAVORS[spec["name"]]:
                if not GpuFlavor.objects.filter(cluster=cluster, name=flavor["name"]).exists():
                    services.gpu_flavor_save(actor=admin, flavor=GpuFlavor(cluster=cluster, **flavor))
        department = Team.objects.filter(slug=DEPARTMENT["slug"]).first() or services.team_create(
            actor=admin, **DEPARTMENT
        )
        for spec in TEAMS:
            if not Team.objects.filter(slug=spec["slug"]).exists():
                services.team_create(actor=admin, parent=department, **spec)
        for username, (slug, role) in PEOPLE.items():
            user = users.filter(username=username).first()
            if user is None:
                user = users.create_user(username, f"{username}@example.com", password=None)
                _set_password_hash(user, password)
            team = Team.objects.get(slug=slug)
            if not Membership.objects.filter(team=team, user=user, role=role).exists():
                services.membership_set(actor=admin, team=team, user=user, role=role)
        demo_placement.seed(admin, servers)
        self._seed_quotas(admin)
        self._seed_rates(admin)
        self.stdout.write(f"Demo logins (password for all: {DEMO_PASSWORD})")
        self.stdout.write("  admin      platform admin (console, approvals)")
        for username, (slug, role) in PEOPLE.items():
            self.stdout.write(f"  {username:<10} {Role(role).label.lower()} of {slug}")

    def _seed_rates(self, admin):
        hour = timezone.now().replace(minute=0, second=0, microsecond=0)
        for (cluster, name), price in RATES.items():
            flavor = GpuFlavor.objects.get(cluster__name=cluster, name=name)
            if RateCard.objects.filter(flavor=flavor).exists():
                continue
            billing_budgets.rate_card_set(actor=admin, flavor=flavor, price=price,
                                          effective_from=hour - timedelta(days=90))
            if (cluster, name) == RATE_CHANGE[0]:
                billing_budgets.rate_card_set(actor=admin, flavor=flavor, price=RATE_CHANGE[1],
                                              effective_from=hour - timedelta(days=7))

    def _seed_idle_job(self):
        """One running job has held its GPUs idle for the whole idle window, so the idle-GPU tables have a row."""
        job = Job.objects.filter(name=IDLE_JOB, state=JobState.RUNNING).select_related("cluster", "flavor",
                                                                                        "team").first()
        if job is None:
            return
        last = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
        hours = [last - timedelta(hours=back) for back in reversed(range(settings.IDLE_GPU_WINDOW_HOURS))]
        owned = sandbox_usage.flavor_nodes(job.cluster)
        runs = usage_history(job.cluster, start=hours[0].replace(hour=0), days=2, owned=owned)
        source = _IdleJobSource(sandbox_usage.SandboxSource(lambda: runs), job,
                                node=(owned.get(job.flavor_id) or [""])[0])
        billing_services.usage_collect_hours(cluster=job.cluster, hours=hours, source=source)
        self.stdout.write(f"  {job.cluster.name:<9} {job.team.slug}/{job.name}: idle for the last {len(hours)} hours")

    def _seed_budgets(self):
        admin = get_user_model().objects.get(username="admin")
        month = billing_selectors.current_month()
        for slug, share in BUDGET_SHARE.items():
            team = Team.objects.get(slug=slug)
            if team.budgets.filter(month=month).exists():
                continue
            statement = billing_selectors.team_statement(team=team, month=month)
            forecast = billing_selectors.forecast(statement)
            if forecast > 0:
                budget = billing_budgets.budget_set(actor=admin, team=team, month=month,
                                                    amount=billing_selectors.money(forecast * Decimal(share)))
                billing_budgets.budget_check(budget=budget)

    def _seed_quotas(self, admin):
        users = get_user_model().objects
        for slug, cluster, flavor, guaranteed, burst, cpu, memory in GRANTS:
            flavor_row = GpuFlavor.objects.get(cluster__name=cluster, name=flavor)
            team = Team.objects.get(slug=slug)
            if not Quota.objects.filter(team=team, flavor=flavor_row).exists():
                request = quota_services.quota_request_create(
                    actor=admin, team=team, flavor=flavor_row, guaranteed=guaranteed, burst=burst, cpu_cores=cpu,
                    memory_gib=memory, justification="Initial allocation for the demo")
                quota_services.quota_request_approve(actor=admin, request=request, note="Initial allocation")
        username, slug, cluster, flavor, guaranteed, why, reason = REJECTED
        team = Team.objects.get(slug=slug)
        if not QuotaRequest.objects.filter(team=team, justification=why).exists():
            request = quota_services.quota_request_create(
                actor=users.get(username=username), team=team, guaranteed=guaranteed, burst=0, justification=why,
                flavor=GpuFlavor.objects.get(cluster__name=cluster, name=flavor))
            quota_services.quota_request_reject(actor=admin, request=request, note=reason)
        for username, slug, cluster, flavor, guaranteed, burst, days, why in ASKS:
            team = Team.objects.get(slug=slug)
            flavor_row = GpuFlavor.objects.get(cluster__name=cluster, name=flavor)
            if not QuotaRequest.objects.filter(team=team, flavor=flavor_row, justification=why).exists():
                quota_services.quota_request_create(
                    actor=users.get(username=username), team=team, flavor=flavor_row, guaranteed=guaranteed,
                    burst=burst, cpu_cores=8 * guaranteed, memory_gib=64 * guaranteed, justification=why,
                    ends_at=timezone.now() + timedelta(days=days) if days else None)
