"""A job's progress reported through the API (Portal.report_progress from a training loop): what it accepts, who
may report (the team's admins and members, with a token that may write and is not limited to other teams), that
only the latest report is kept, the job detail shows it, and what it costs in queries."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.choices import JobState
from jobs.models import Job
from tenants.choices import Role
from tenants.services import access_token_create
from tests.api.test_token_scope import bearer
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def url(job) -> str:
    return f"/api/v1/jobs/{job.pk}/progress/"


def test_a_member_reports_progress_and_the_job_detail_shows_the_latest(world, api_as):
    api = api_as(world.member)
    first = api.post(url(world.job), {"done": 120, "total": 1000}, format="json")
    assert first.status_code == 200
    assert first.json()["done"] == 120 and first.json()["percentage"] == 12.0 and first.json()["reports"] == 1
    second = api.post(url(world.job), {"done": 600, "total": 1000}, format="json").json()
    assert (second["done"], second["reports"]) == (600, 2) and second["reported_at"].endswith("Z")
    restarted = api.post(url(world.job), {"done": 5, "total": 50}, format="json").json()
    assert restarted["reports"] == 1  # a new total starts a new series
    shown = api.get(f"/api/v1/jobs/{world.job.pk}/").json()["progress"]
    assert shown == restarted
    assert api_as(world.outsider).get(f"/api/v1/jobs/{world.other_job.pk}/").json()["progress"] is None  # none yet


@pytest.mark.parametrize("body, field", [
    ({"done": 11, "total": 10}, "done"),
    ({"done": -1, "total": 10}, "done"),
    ({"done": 0, "total": 0}, "total"),
    ({"done": 1}, "total"),
    ({"done": "half", "total": 10}, "done"),
    ({"done": 1, "total": 2**63}, "total"),
])
def test_bad_reports_are_refused_with_the_field_and_change_nothing(world, api_as, body, field):
    response = api_as(world.member).post(url(world.job), body, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.json()
    assert Job.objects.get(pk=world.job.pk).progress_total is None


def test_only_the_teams_admins_and_members_report_and_another_teams_job_is_not_found(world, api_as):
    body = {"done": 1, "total": 10}
    assert api_as(world.viewer).post(url(world.job), body, format="json").status_code == 403
    assert api_as(world.outsider).post(url(world.job), body, format="json").status_code == 404
    assert api_as(world.member).post(url(world.other_job), body, format="json").status_code == 404
    assert api_as(None).post(url(world.job), body, format="json").status_code == 401
    assert api_as(world.admin).post(url(world.job), body, format="json").status_code == 200


def test_a_read_only_token_or_one_limited_to_another_team_cannot_report(world):
    body = {"done": 1, "total": 10}
    read_only = bearer(access_token_create(actor=world.member, name="dash", read_only=True)[1])
    assert read_only.post(url(world.job), body, format="json").status_code == 403
    MembershipFactory(team=world.other_team, user=world.member, role=Role.MEMBER)
    elsewhere = bearer(access_token_create(actor=world.member, name="vision", teams=[world.other_team])[1])
    assert elsewhere.post(url(world.job), body, format="json").status_code == 404
    assert Job.objects.get(pk=world.job.pk).progress_total is None


def test_a_job_that_has_ended_takes_no_more_reports(world, api_as):
    Job.objects.filter(pk=world.job.pk).update(state=JobState.SUCCEEDED)
    response = api_as(world.member).post(url(world.job), {"done": 10, "total": 10}, format="json")
    assert response.status_code == 409 and "no more progress reports" in response.json()["error"]["message"]


def test_a_report_costs_a_fixed_number_of_queries(world, api_as):
    api = api_as(world.member)
    api.post(url(world.job), {"done": 1, "total": 10}, format="json")
    counts = []
    for done in (2, 3):
        with CaptureQueriesContext(connection) as queries:
            assert api.post(url(world.job), {"done": done, "total": 10}, format="json").status_code == 200
        counts.append(len(queries))
    # token + user, the scoped job, the role, the update, the re-read (and the token's last use at most once a
    # minute): no more however many jobs or reports there are
    assert counts[0] == counts[1] <= 5, counts


def test_a_report_is_kept_and_answered_while_redis_is_down(world, api_as, caplog, run_on_commit):
    import logging

    from django.test import override_settings

    from tests.api.test_degraded import _closed_port

    down = {"default": {"BACKEND": "portal.cache.RedisCache", "LOCATION": f"redis://127.0.0.1:{_closed_port()}/0",
                        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}}
    api = api_as(world.member)
    with override_settings(CACHES=down), caplog.at_level(logging.WARNING, logger="portal.enqueue"), run_on_commit():
        response = api.post(url(world.job), {"done": 4, "total": 10}, format="json")
    assert response.status_code == 200 and Job.objects.get(pk=world.job.pk).progress_done == 4
    assert any("could not enqueue jobs.tasks.job_estimates_refresh_task" in r.getMessage() for r in caplog.records)
