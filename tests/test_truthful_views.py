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

from jobs import selectors as job_selectors
from jobs import status, sync
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
    changes = sync._state_changes(job, status.Observed("admitted", admitted=True, admitted_at=earlier),
                                  timezone.now())
    assert changes["admitted_at"] == job.submitted_at
    job.admitted_at = job.submitted_at - timedelta(seconds=1)  # a row synced before the clamp
    assert job.queue_wait_seconds == 0
