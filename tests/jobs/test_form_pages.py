"""The job form and page as a member meets them: preview refuses a job that could never start (the same check as
Submit), flavors say what is free, and the logs download whole."""

import html
import re

import pytest
from django.test import Client

from jobs.models import Job
from tests.jobs.test_services import submit, world  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode())))


def member_client(world):  # noqa: F811
    client = Client()
    client.force_login(world["member"])
    return client


def form(world, **overrides):  # noqa: F811
    return {"flavor": world["flavor"].pk, "name": "train", "image": "ghcr.io/acme/train:1.2",
            "command": "torchrun train.py --model 'bert large'", "workers": 2, "gpus_per_worker": 4,
            "cpu_per_worker": 4, "memory_gib_per_worker": 32, "priority_tier": world["tier"].pk,
            "max_runtime_minutes": 60, "preview": "1", **overrides}


def test_preview_runs_the_feasibility_check(world):  # noqa: F811
    client = member_client(world)
    url = "/teams/nlp/jobs/new/pytorch/"
    page = client.get(url)
    assert "h100 (nvidia.com/gpu): 16 of 16 free for the team now" in text(page)
    never = client.post(url, form(world, workers=5))
    body = never.content.decode()
    assert never.status_code == 400 and 'id="yaml-preview"' not in body
    assert "20 GPUs is more than the team's h100 limit of 16" in text(never) and 'id="id_workers-error"' in body
    assert 'value="5"' in body  # what was typed is kept
    fine = client.post(url, form(world))
    assert 'id="yaml-preview"' in fine.content.decode() and not Job.objects.exists()


def test_free_units_count_what_running_jobs_hold(world):  # noqa: F811
    Job.objects.filter(pk=submit(world, workers=1, gpus_per_worker=4).pk).update(state="running")
    assert "12 of 16 free for the team now" in text(member_client(world).get("/teams/nlp/jobs/new/batch/"))


def test_logs_download_whole(sandbox, world, run_on_commit):  # noqa: F811
    with run_on_commit():
        job = submit(world, workers=1, gpus_per_worker=1)
    client = member_client(world)
    response = client.get(f"/jobs/{job.pk}/logs.txt")
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="{job.object_name}-logs.txt"'
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == "No pods.\n"  # the plain sandbox runs no pods: the file says so
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="/jobs/{job.pk}/logs.txt"' in page
    assert "torchrun train.py" in page and "&amp;id" not in page
