"""The Django admin shows jobs read-only (they end by cancelling, and their rows are the usage history), and deletes
job templates only through the service, audited with the actor."""

import pytest
from django.urls import reverse

from jobs.models import Job, JobTemplate
from tenants.models import AuditEvent
from tests.api.world import build_world

pytestmark = pytest.mark.django_db


def test_jobs_are_read_only_in_the_admin(admin_client):
    job = build_world().job
    assert admin_client.get(reverse("admin:jobs_job_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).status_code == 200  # a view page
    assert admin_client.post(reverse("admin:jobs_job_change", args=[job.pk]), {"name": "renamed"}).status_code == 403
    assert admin_client.post(reverse("admin:jobs_job_delete", args=[job.pk]), {"post": "yes"}).status_code == 403
    admin_client.post(reverse("admin:jobs_job_changelist"),
                      {"action": "delete_selected", "post": "yes", "_selected_action": [job.pk]})
    assert Job.objects.filter(pk=job.pk, name="train").exists()
    assert admin_client.get(reverse("admin:jobs_job_add")).status_code == 403


def test_template_deletes_in_the_admin_are_audited_with_the_actor(admin_client):
    world = build_world()
    templates = [JobTemplate.objects.create(team=world.team, name=name, kind="pytorch", values={"workers": 2},
                                            created_by=world.member) for name in ("small", "large")]
    assert admin_client.post(reverse("admin:jobs_jobtemplate_delete", args=[templates[0].pk]),
                             {"post": "yes"}).status_code == 302
    admin_client.post(reverse("admin:jobs_jobtemplate_changelist"),
                      {"action": "delete_selected", "post": "yes", "_selected_action": [templates[1].pk]})
    assert not JobTemplate.objects.exists()
    events = AuditEvent.objects.filter(action="job_template.delete").order_by("pk")
    assert [(e.actor, e.object_repr, e.team, e.before["values"]) for e in events] == [
        (admin_client.admin, "nlp/small", world.team, {"workers": 2}),
        (admin_client.admin, "nlp/large", world.team, {"workers": 2})]
    assert all(e.source_ip == "127.0.0.1" for e in events)
    assert admin_client.get(reverse("admin:jobs_jobtemplate_add")).status_code == 403
