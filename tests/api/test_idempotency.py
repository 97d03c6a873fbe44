"""Submissions a client can safely retry: an `Idempotency-Key` makes the job and quota-request creates answer a
retry with the first answer (one row, not two), and a broker that is away when the write commits never turns a
stored write into a 500 (the due sweep sends what the broker lost)."""

import threading

import pytest
from django.db import connection
from kombu.exceptions import OperationalError as BrokerDown

from jobs import selectors as job_selectors
from jobs import tasks as job_tasks
from jobs.models import Job
from quotas.models import QuotaRequest
from tenants.models import IdempotencyKey
from tests.api.test_endpoints import V1, submit_body

pytestmark = pytest.mark.django_db


def test_a_retried_job_submission_with_its_key_creates_one_job(world, api_as):
    client = api_as(world.member)
    first = client.post(f"{V1}/jobs/", submit_body(), format="json", HTTP_IDEMPOTENCY_KEY="run-7f3a")
    again = client.post(f"{V1}/jobs/", submit_body(), format="json", HTTP_IDEMPOTENCY_KEY="run-7f3a")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert Job.objects.filter(name="finetune").count() == 1
    other = client.post(f"{V1}/jobs/", submit_body(), format="json", HTTP_IDEMPOTENCY_KEY="run-8b01")
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


def test_a_key_is_per_user_and_bound_to_its_request(world, api_as):
    member, admin = api_as(world.member), api_as(world.admin)
    mine = member.post(f"{V1}/jobs/", submit_body(), format="json", HTTP_IDEMPOTENCY_KEY="k1").json()
    theirs = admin.post(f"{V1}/jobs/", submit_body(), format="json", HTTP_IDEMPOTENCY_KEY="k1").json()
    assert mine["id"] != theirs["id"]
    reused = member.post(f"{V1}/jobs/", submit_body(name="other"), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert reused.status_code == 422 and reused.json()["error"]["code"] == "idempotency_key_reused"
    bad = member.post(f"{V1}/jobs/", submit_body(), format="json", HTTP_IDEMPOTENCY_KEY="has space")
    assert bad.status_code == 400 and "Idempotency-Key" in bad.json()["error"]["fields"]


def test_a_refused_submission_keeps_nothing_so_the_fixed_retry_may_use_the_key(world, api_as):
    client = api_as(world.member)
    refused = client.post(f"{V1}/jobs/", submit_body(gpus_per_worker=16), format="json", HTTP_IDEMPOTENCY_KEY="k2")
    assert refused.status_code == 400 and not IdempotencyKey.objects.exists()
    retried = client.post(f"{V1}/jobs/", submit_body(gpus_per_worker=16), format="json", HTTP_IDEMPOTENCY_KEY="k2")
    assert retried.status_code == 400  # answered again, not replayed


def test_a_retried_quota_request_with_its_key_creates_one_request(world, api_as):
    client = api_as(world.member)
    client.post(f"{V1}/quota-requests/{world.quota_request.pk}/withdraw/")
    ask = {"team": "nlp", "flavor": "h100", "guaranteed_units": 2, "burst_units": 1,
           "justification": "Evaluation sweep this month"}
    first = client.post(f"{V1}/quota-requests/", ask, format="json", HTTP_IDEMPOTENCY_KEY="q-1")
    again = client.post(f"{V1}/quota-requests/", ask, format="json", HTTP_IDEMPOTENCY_KEY="q-1")
    assert (first.status_code, again.status_code) == (201, 201), again.content
    assert again.json()["id"] == first.json()["id"]
    assert QuotaRequest.objects.filter(state="pending").count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_with_one_key_create_one_job(api_as):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers anyway; the row lock race needs PostgreSQL")
    from tests.api.world import build_world

    world = build_world()
    answers = []

    def submit():
        try:
            answers.append(api_as(world.member).post(f"{V1}/jobs/", submit_body(), format="json",
                                                     HTTP_IDEMPOTENCY_KEY="race").json()["id"])
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 4 and len(set(answers)) == 1
    assert Job.objects.filter(name="finetune").count() == 1


def test_a_broker_that_is_away_after_commit_does_not_fail_the_submission(world, api_as, monkeypatch,
                                                                         django_capture_on_commit_callbacks):
    def refuse(*args, **kwargs):
        raise BrokerDown("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(job_tasks.job_reconcile_task, "apply_async", refuse)
    client = api_as(world.member)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"{V1}/jobs/", submit_body(), format="json")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.pk in job_selectors.jobs_due()  # the due sweep sends what the broker lost
