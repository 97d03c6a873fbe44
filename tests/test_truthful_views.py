"""What a person meets outside a rendered page, or before one: template comments that cannot leak, commands
without a library's banner, API docs that show the header's value, a submit form whose "free" is what a job can
start on, and a queue wait that is never negative."""

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from backends.observe import Observed
from jobs import selectors as job_selectors
from jobs import sync
from jobs.models import Job
from quotas import services as quota_services
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
)

ROOT = Path(settings.BASE_DIR)


def test_no_template_opens_a_comment_it_closes_on_another_line():
    # Django's {# #} ends at the line's end: a comment over two lines is printed on the page as text.
    leaking = [f"{path.relative_to(ROOT)}:{number}"
               for path in (ROOT / "templates").rglob("*.html")
               for number, line in enumerate(path.read_text().splitlines(), start=1)
               if "{#" in line and "#}" not in line.split("{#", 1)[1]]
    assert leaking == []


def test_management_commands_print_no_login_lockout_banner():
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "AXES" not in result.stdout + result.stderr


def test_the_api_docs_show_what_follows_bearer():
    # The description is Markdown: a bare <token> is read as an HTML tag and vanishes.
    description = settings.SPECTACULAR_SETTINGS["DESCRIPTION"]
    assert "`Authorization: Bearer gpp_…`" in description and "<token>" not in description


@pytest.mark.django_db
def test_free_on_the_submit_form_is_what_a_job_can_start_on():
    cluster = ClusterFactory()
    flavor = GpuFlavorFactory(cluster=cluster, name="a100", gpus_per_node=8, capacity=24)
    tier = PriorityTierFactory(name="standard", value=10, is_default=True)
    admin = PlatformAdminFactory()
    short, busy = TeamFactory(slug="short"), TeamFactory(slug="busy")
    user = MembershipFactory(team=busy).user
    quota_services.quota_set(actor=admin, team=short, flavor=flavor, guaranteed=4, burst=20)
    quota_services.quota_set(actor=admin, team=busy, flavor=flavor, guaranteed=20, burst=0)
    for state in ("running", "running", "admitted", "queued"):
        Job.objects.create(team=busy, cluster=cluster, flavor=flavor, priority_tier=tier, kind="batch", name="j",
                           image="x:1", command=["x"], workers=1, gpus_per_worker=6, submitted_by=user, state=state)
    # busy holds 18 of 24 (the queued job holds nothing): short has its 4 guaranteed and 2 idle to borrow beyond
    # them are not both free, only the 6 no job holds.
    assert job_selectors.team_flavor_room(team=short) == {flavor.pk: (24, 6)}
    assert job_selectors.team_flavor_room(team=busy) == {flavor.pk: (20, 2)}
    # A team's own guarantee is free even when another team borrowed it: the scheduler reclaims it.
    Job.objects.filter(team=busy, state="queued").update(state="running")
    assert job_selectors.team_flavor_room(team=short) == {flavor.pk: (24, 4)}


@pytest.mark.django_db
def test_a_job_is_never_admitted_before_it_was_submitted():
    job = Job(submitted_at=timezone.now(), state="queued")
    earlier = (job.submitted_at - timedelta(seconds=1)).replace(microsecond=0).isoformat()
    changes = sync._state_changes(job, Observed("admitted", admitted=True, admitted_at=earlier),
                                  timezone.now())
    assert changes["admitted_at"] == job.submitted_at
    job.admitted_at = job.submitted_at - timedelta(seconds=1)  # a row synced before the clamp
    assert job.queue_wait_seconds == 0


@pytest.mark.django_db
def test_capacity_adds_up_in_whole_gpus_and_names_its_units(admin_client):
    from tenants.choices import Sharing

    cluster = ClusterFactory(name="gpu-east")
    GpuFlavorFactory(cluster=cluster, name="a100", capacity=64, gpus_per_node=8)
    GpuFlavorFactory(cluster=cluster, name="a100-1g", resource_name="nvidia.com/mig-1g.10gb", sharing=Sharing.MIG,
                     capacity=56, gpus_per_node=56)
    clusters = admin_client.get("/console/clusters/").content.decode()
    assert "Capacity (GPUs)" in clusters and ">72<" in clusters.replace(" ", "")  # 64 GPUs + 56 slices of 1/7
    detail = admin_client.get("/console/clusters/gpu-east/").content.decode()
    assert "GPUs / node" not in detail
    assert '56 <span class="muted">slices</span>' in detail and '8 <span class="muted">GPUs</span>' in detail


@pytest.mark.django_db
def test_the_console_usage_charts_cover_the_month_shown(admin_client):
    from datetime import UTC, datetime

    from tests.factories import UsageHourFactory

    team, flavor = TeamFactory(slug="nlp"), GpuFlavorFactory()
    for day in (datetime(2026, 9, 20, 5, tzinfo=UTC), datetime(2026, 10, 3, 5, tzinfo=UTC)):
        UsageHourFactory(team=team, flavor=flavor, cluster=flavor.cluster, hour=day)
    page = admin_client.get("/console/usage/?month=2026-10")
    assert "2026-10-03" in page.context["heatmap"] and "2026-09-20" not in page.context["heatmap"]
    assert "2026-09-20" not in page.context["utilisation_chart"]


@pytest.mark.django_db
def test_audit_rows_read_as_words_and_filter_by_who_and_object(admin_client):
    from tenants.models import AuditEvent

    team = TeamFactory(slug="nlp")
    AuditEvent.objects.create(actor=admin_client.admin, action="quota_request.approve", object_type="quotarequest",
                              object_id="18", object_repr="#18", team=team, before={"state": "pending"},
                              after={"state": "approved", "granted_guaranteed": 12})
    AuditEvent.objects.create(action="job.submit", object_type="job", object_id="4", object_repr="nlp/train",
                              team=team, after={"kind": "batch"})
    page = admin_client.get("/console/audit/").content.decode()
    assert "#18 #18" not in page.replace("</span>", "")
    assert "{&#x27;state&#x27;" not in page and "{'state'" not in page
    assert "pending → approved" in page and "granted guaranteed</span> 12" in page
    assert len(admin_client.get("/console/audit/", {"actor": "root-admin"}).context["page"].object_list) == 1
    assert len(admin_client.get("/console/audit/", {"object_type": "job"}).context["page"].object_list) == 1
