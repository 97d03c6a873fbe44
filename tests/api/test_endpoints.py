"""The /api/v1 endpoints: content, the one error shape, scoping and roles, filters, pagination and query budgets.
Every request authenticates with a real personal access token."""

import base64
from datetime import timedelta
from urllib.parse import urlencode

import pytest
import yaml
from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from jobs.choices import JobState
from jobs.models import Job
from quotas.choices import RequestState
from quotas.models import Quota, QuotaRequest
from tenants.choices import Role
from tenants.models import AuditEvent, Membership
from tests.factories import GpuFlavorFactory, UserFactory

pytestmark = pytest.mark.django_db
V1 = "/api/v1"


def error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["message"]
    return body["error"]


def submit_body(**overrides) -> dict:
    return {"team": "nlp", "kind": "pytorch", "name": "finetune", "flavor": "h100", "image": "ghcr.io/acme/train:2",
            "command": ["torchrun", "--nproc-per-node", "4", "train.py"], "workers": 2, "gpus_per_worker": 4,
            **overrides}


# --- me, teams, members ----------------------------------------------------------------------------------------


def test_me_lists_my_teams_and_roles(world, api_as):
    body = api_as(world.viewer).get(f"{V1}/me/").json()
    assert body == {"username": "vic", "email": "vic@example.com", "is_platform_admin": False,
                    "teams": [{"slug": "nlp", "name": "Natural Language", "role": "viewer"}]}
    admin = api_as(world.platform_admin).get(f"{V1}/me/").json()
    assert admin["is_platform_admin"] and [t["slug"] for t in admin["teams"]] == ["nlp", "vision"]


def test_teams_are_scoped_to_the_caller(world, api_as):
    body = api_as(world.member).get(f"{V1}/teams/").json()
    assert [t["slug"] for t in body["results"]] == ["nlp"]
    assert body["results"][0]["namespace"] == "nlp" and body["results"][0]["parent"] is None
    error(api_as(world.member).get(f"{V1}/teams/vision/"), 404)
    assert api_as(world.platform_admin).get(f"{V1}/teams/vision/").status_code == 200


def test_team_admin_manages_members_and_others_may_not(world, api_as):
    UserFactory(username="newbie")
    url = f"{V1}/teams/nlp/members/"
    assert error(api_as(world.member).post(url, {"username": "newbie", "role": "member"}, format="json"),
                 403)["code"] == "permission_denied"
    error(api_as(world.outsider).post(url, {"username": "newbie"}, format="json"), 404)
    response = api_as(world.admin).post(url, {"username": "newbie", "role": "viewer"}, format="json")
    assert response.status_code == 201 and response.json() == {"username": "newbie", "email": "newbie@example.com",
                                                                "role": "viewer"}
    assert error(api_as(world.admin).post(url, {"username": "ghost"}, format="json"), 400)["fields"] == {
        "username": ["There is no active user named 'ghost'."]}
    response = api_as(world.admin).patch(f"{url}newbie/", {"role": "member"}, format="json")
    assert response.json()["role"] == "member"
    assert api_as(world.admin).delete(f"{url}newbie/").status_code == 204
    assert not Membership.objects.filter(user__username="newbie").exists()
    assert list(AuditEvent.objects.filter(action__startswith="membership").values_list("actor__username", flat=True))
    error(api_as(world.admin).delete(f"{url}newbie/"), 404)
    members = api_as(world.viewer).get(url).json()["results"]
    assert {m["username"]: m["role"] for m in members} == {"ada": "admin", "erin": "member", "vic": "viewer"}


def test_the_last_admin_cannot_leave(world, api_as):
    fields = error(api_as(world.admin).patch(f"{V1}/teams/nlp/members/ada/", {"role": "member"}, format="json"),
                   409)
    assert fields["message"]
    assert Membership.objects.get(user=world.admin).role == Role.ADMIN


# --- clusters, flavors, quotas ---------------------------------------------------------------------------------


def test_clusters_and_flavors(world, api_as):
    client = api_as(world.member)
    assert client.get(f"{V1}/clusters/").json()["results"] == [
        {"name": "east", "display_name": "", "scheduler": "kueue", "active": True}]
    flavors = client.get(f"{V1}/flavors/", {"cluster": "east"}).json()["results"]
    assert flavors[0] | {"id": 0} == {
        "id": 0, "cluster": "east", "name": "h100", "resource_name": "nvidia.com/gpu", "gpu_model": "NVIDIA H100",
        "capacity_units": 64, "gpus_per_node": 8, "gpu_memory_gb": 80, "gpu_fraction": 1.0, "sharing": "exclusive",
        "replicas": None, "device_class": "", "device_selector": "", "isolation": "Whole GPUs: nothing is shared."}
    assert client.get(f"{V1}/flavors/", {"cluster": "west"}).json()["results"] == []
    error(client.get(f"{V1}/clusters/west/"), 404)


def test_team_quotas_with_usage(world, api_as):
    # What a reconcile records from an applied namespace whose ResourceQuota status the cluster reports.
    world.team.namespaces.update(
        usage={"nvidia.com/gpu": 6}, quota_status={"hard": {"nvidia.com/gpu": 12}, "used": {"nvidia.com/gpu": 6}},
        observed_generation=F("generation"), conditions=[{"type": "Ready", "status": "True", "reason": "Applied"}])
    rows = api_as(world.viewer).get(f"{V1}/teams/nlp/quotas/").json()["results"]
    assert rows == [{"id": world.quota.pk, "team": "nlp", "cluster": "east", "flavor": "h100",
                     "flavor_id": world.flavor.pk, "resource_name": "nvidia.com/gpu", "guaranteed_units": 8,
                     "burst_units": 4, "limit_units": 12, "in_use_units": 6, "not_applied": "", "cpu_cores": 32,
                     "memory_gib": 256, "storage_gib": 0, "expires_at": None}]
    world.team.namespaces.update(quota_status={"hard": {"nvidia.com/gpu": 8}, "used": {"nvidia.com/gpu": 6}})
    (row,) = api_as(world.viewer).get(f"{V1}/teams/nlp/quotas/").json()["results"]
    assert row["not_applied"].startswith("The cluster's ResourceQuota enforces 8 nvidia.com/gpu, not the 12")
    error(api_as(world.outsider).get(f"{V1}/teams/nlp/quotas/"), 404)


@pytest.mark.parametrize("usage, in_use", [({"nvidia.com/gpu": 6}, 6), ({}, 0), ({"nvidia.com/mig-1g.10gb": 3}, 0)])
def test_the_quota_page_and_the_api_read_in_use_units_from_one_selector(world, api_as, client, usage, in_use):
    world.team.namespaces.update(quota_status={"used": usage})
    rows = api_as(world.viewer).get(f"{V1}/teams/nlp/quotas/").json()["results"]
    assert [r["in_use_units"] for r in rows] == [in_use]
    client.force_login(world.viewer)
    page = client.get("/teams/nlp/quota/")
    assert [row.in_use for row in page.context["rows"]] == [in_use]
    assert f"{in_use} in use" in page.content.decode()


# --- quota requests --------------------------------------------------------------------------------------------


def test_member_requests_quota_with_the_forms_defaults(world, api_as):
    ends = (timezone.now() + timedelta(days=10)).replace(microsecond=0)
    ask = {"team": "nlp", "flavor": "h100", "guaranteed_units": 2, "burst_units": 1, "ends_at": ends.isoformat(),
           "justification": "Evaluation sweep this month"}
    # The team already waits on a decision for h100: a second question about it is refused, naming the first.
    refused = error(api_as(world.member).post(f"{V1}/quota-requests/", ask, format="json"), 400)
    assert f"Request #{world.quota_request.pk} for h100 in east is still pending" in refused["fields"]["flavor"][0]
    api_as(world.member).post(f"{V1}/quota-requests/{world.quota_request.pk}/withdraw/")
    response = api_as(world.member).post(f"{V1}/quota-requests/", ask, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["state"], body["cpu_cores"], body["memory_gib"], body["requested_by"]) == ("pending", 16, 128, "erin")
    assert body["ends_at"] == ends.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(("body", "field"), [
    ({"guaranteed_units": -1}, "guaranteed_units"),
    ({"guaranteed_units": "many"}, "guaranteed_units"),
    ({"justification": "short"}, "justification"),
    ({"flavor_id": 999999}, "flavor_id"),
    ({"flavor": "b200"}, "flavor"),
    ({"flavor": "h100", "flavor_id": 1}, "flavor"),  # one or the other
    ({"ends_at": "2001-01-01T00:00:00Z"}, "ends_at"),
    ({"guaranteed_units": 60, "burst_units": 10}, "non_field_errors"),  # more than the flavor could ever give
])
def test_bad_quota_requests_name_the_field(world, api_as, body, field):
    world.quota_request.delete()  # no pending request in the way: each case fails on its own field
    payload = {"team": "nlp", "flavor_id": world.flavor.pk, "guaranteed_units": 2,
               "justification": "Evaluation sweep this month", **body}
    if "flavor" in body and "flavor_id" not in body:
        payload.pop("flavor_id")
    assert field in error(api_as(world.member).post(f"{V1}/quota-requests/", payload, format="json"), 400)["fields"]


def test_viewer_cannot_request_and_outsider_sees_nothing(world, api_as):
    payload = {"team": "nlp", "flavor_id": world.flavor.pk, "guaranteed_units": 2,
               "justification": "Evaluation sweep this month"}
    error(api_as(world.viewer).post(f"{V1}/quota-requests/", payload, format="json"), 403)
    error(api_as(world.outsider).post(f"{V1}/quota-requests/", payload, format="json"), 404)
    assert api_as(world.outsider).get(f"{V1}/quota-requests/").json()["results"] == []
    error(api_as(world.outsider).get(f"{V1}/quota-requests/{world.quota_request.pk}/"), 404)


def test_withdraw(world, api_as):
    url = f"{V1}/quota-requests/{world.quota_request.pk}/withdraw/"
    error(api_as(world.viewer).post(url), 403)
    assert api_as(world.member).post(url).json()["state"] == "withdrawn"
    assert "already withdrawn" in error(api_as(world.member).post(url), 409)["message"]


def test_platform_admin_previews_and_approves_an_adjusted_amount(world, api_as):
    pk = world.quota_request.pk
    error(api_as(world.admin).get(f"{V1}/quota-requests/{pk}/impact/"), 403)
    error(api_as(world.admin).post(f"{V1}/quota-requests/{pk}/approve/", {}, format="json"), 403)
    admin = api_as(world.platform_admin)
    impact = admin.get(f"{V1}/quota-requests/{pk}/impact/").json()
    assert impact | {"shrinking": []} == {
        "flavor": "h100", "capacity_units": 64, "allowed_units": 64, "overcommit": 1.0,
        "guaranteed_before_units": 16, "guaranteed_after_units": 24, "headroom_after_units": 40,
        "team_share_after_percent": 66.7, "fits": True, "current": {"guaranteed_units": 8, "burst_units": 4},
        "proposed": {"guaranteed_units": 16, "burst_units": 4}, "shrinking": []}
    assert admin.get(f"{V1}/quota-requests/{pk}/impact/", {"guaranteed_units": "60"}).json()["fits"] is False
    error(admin.get(f"{V1}/quota-requests/{pk}/impact/", {"guaranteed_units": "-3"}), 400)
    too_much = admin.post(f"{V1}/quota-requests/{pk}/approve/", {"guaranteed_units": 60}, format="json")
    assert "more than the 64 allowed" in error(too_much, 409)["message"]
    body = admin.post(f"{V1}/quota-requests/{pk}/approve/", {"guaranteed_units": 12, "burst_units": 2,
                                                             "note": "12 for now"}, format="json").json()
    assert (body["state"], body["granted_guaranteed_units"], body["decided_by"]) == ("approved", 12, "root")
    assert Quota.objects.get(pk=world.quota.pk).guaranteed == 12


def test_reject_needs_a_note(world, api_as):
    admin = api_as(world.platform_admin)
    url = f"{V1}/quota-requests/{world.quota_request.pk}/reject/"
    assert error(admin.post(url, {}, format="json"), 400)["fields"] == {"note": ["This field is required."]}
    assert admin.post(url, {"note": "No capacity this quarter"}, format="json").json()["state"] == "rejected"
    assert QuotaRequest.objects.get(pk=world.quota_request.pk).state == RequestState.REJECTED


def test_request_list_filters(world, api_as):
    client = api_as(world.platform_admin)
    assert len(client.get(f"{V1}/quota-requests/", {"state": "pending"}).json()["results"]) == 1
    assert client.get(f"{V1}/quota-requests/", {"team": "vision"}).json()["results"] == []
    assert "state" in error(client.get(f"{V1}/quota-requests/", {"state": "maybe"}), 400)["fields"]


# --- jobs ------------------------------------------------------------------------------------------------------


def test_submit_pytorch_and_read_it_back(world, api_as):
    response = api_as(world.member).post(f"{V1}/jobs/", submit_body(env={"EPOCHS": "3"}), format="json")
    assert response.status_code == 201, response.content
    job = response.json()
    assert (job["kind"], job["gpus"], job["state"], job["priority"], job["submitted_by"]) == (
        "pytorch", 8, "pending", "standard", "erin")
    assert job["env"] == {"EPOCHS": "3"} and job["terminal"] is False
    assert job["submitted_at"].endswith("Z")
    assert api_as(world.viewer).get(f"{V1}/jobs/{job['id']}/").json() == job
    assert AuditEvent.objects.filter(action="job.submit", object_id=str(job["id"])).exists()


def test_submit_ray_job(world, api_as):
    response = api_as(world.member).post(f"{V1}/jobs/", submit_body(kind="ray", name="tune", workers=1,
                                                                      command=["python", "tune.py"]), format="json")
    assert response.status_code == 201 and response.json()["kind"] == "ray"


@pytest.mark.parametrize(("overrides", "field"), [
    ({"workers": 4, "gpus_per_worker": 8}, "workers"),  # 32 GPUs > the team's 12: it could never start
    ({"gpus_per_worker": 16}, "gpus_per_worker"),  # more than a node has
    ({"name": "Bad_Name"}, "name"),
    ({"image": "not an image; rm -rf /"}, "image"),
    ({"env": {"1BAD": "x"}}, "env"),
    ({"env": {"EPOCHS\n": "3"}}, "env"),  # `$` would match before the newline: names are matched whole
    ({"command": []}, "command"),
    ({"flavor": "tpu"}, "flavor"),
    ({"priority": "platinum"}, "priority"),
    ({"kind": "mpi"}, "kind"),
    ({"workers": 0}, "workers"),
])
def test_infeasible_or_bad_submissions_name_the_field(world, api_as, overrides, field):
    fields = error(api_as(world.member).post(f"{V1}/jobs/", submit_body(**overrides), format="json"), 400)["fields"]
    assert field in fields
    assert Job.objects.count() == 2


def test_a_flavor_name_two_clusters_share_needs_the_cluster(world, api_as):
    GpuFlavorFactory(name="h100", cluster__name="south")
    client = api_as(world.member)
    fields = error(client.post(f"{V1}/jobs/", submit_body(), format="json"), 400)["fields"]
    assert "several clusters" in fields["cluster"][0]
    fields = error(client.post(f"{V1}/jobs/", submit_body(cluster="north"), format="json"), 400)["fields"]
    assert fields["flavor"] == ["There is no flavor named 'h100' in north."]
    assert client.post(f"{V1}/jobs/", submit_body(cluster="east"), format="json").status_code == 201


def test_submit_roles_and_scoping(world, api_as):
    error(api_as(world.viewer).post(f"{V1}/jobs/", submit_body(), format="json"), 403)
    error(api_as(world.outsider).post(f"{V1}/jobs/", submit_body(), format="json"), 404)
    error(api_as(world.member).post(f"{V1}/jobs/", "not json", content_type="text/plain"), 415)


def test_job_list_is_scoped_filtered_and_paged(world, api_as):
    client = api_as(world.member)
    for n in range(4):
        client.post(f"{V1}/jobs/", submit_body(name=f"run-{n}", workers=1), format="json")
    body = client.get(f"{V1}/jobs/", {"page_size": 2}).json()
    assert [j["name"] for j in body["results"]] == ["run-3", "run-2"]
    second = client.get(body["next"]).json()
    assert [j["name"] for j in second["results"]] == ["run-1", "run-0"]
    names = [j["name"] for j in client.get(f"{V1}/jobs/", {"kind": "pytorch", "user": "erin"}).json()["results"]]
    assert names == ["run-3", "run-2", "run-1", "run-0", "train"]
    assert client.get(f"{V1}/jobs/", {"team": "vision"}).json()["results"] == []
    assert "state" in error(client.get(f"{V1}/jobs/", {"state": "exploded"}), 400)["fields"]
    future = (timezone.now() + timedelta(hours=1)).isoformat()
    assert client.get(f"{V1}/jobs/", {"submitted_after": future}).json()["results"] == []
    error(client.get(f"{V1}/jobs/{world.other_job.pk}/"), 404)


@pytest.mark.parametrize("moment, expected", [
    # Offsets Python parses but PostgreSQL refuses ("time zone displacement out of range"): found by the fuzz test.
    ("7063-05-23T21:20:02.19-21:16", 200),
    ("2026-01-01T00:00:00+15:30", 200),
    # Past year 9999 once moved to UTC.
    ("9999-12-31T23:00:00-05:00", 400),
])
def test_job_list_time_filters_take_any_offset_or_say_why(world, api_as, moment, expected):
    response = api_as(world.member).get(f"{V1}/jobs/", {"submitted_before": moment})
    if expected == 400:
        assert "submitted_before" in error(response, 400)["fields"]
    else:
        assert response.status_code == 200, response.content


def _bulk_jobs(world, count: int) -> None:
    Job.objects.bulk_create([
        Job(team=world.team, cluster=world.cluster, flavor=world.flavor, priority_tier=world.job.priority_tier,
            kind="batch", name=f"bulk-{n}", image="ghcr.io/acme/eval:1", command=["python"],
            submitted_by=world.member, state=JobState.SUCCEEDED) for n in range(count)])


def test_job_list_queries_do_not_grow_with_jobs(world, api_as, django_assert_max_num_queries):
    client = api_as(world.member)
    client.get(f"{V1}/jobs/")  # the token's first use writes last-used once; measure the steady state
    _bulk_jobs(world, 10)
    with django_assert_max_num_queries(3):
        small = client.get(f"{V1}/jobs/")
    _bulk_jobs(world, 200)
    with django_assert_max_num_queries(3):
        large = client.get(f"{V1}/jobs/")
    assert len(small.json()["results"]) == 11 and len(large.json()["results"]) == 50


def _follow(client, url: str, link: str) -> list[dict]:
    pages = []
    while url:
        pages.append(client.get(url).json())
        url = pages[-1][link]
    return pages


def test_job_list_pages_forward_and_back_through_jobs_of_the_same_moment(world, api_as):
    _bulk_jobs(world, 7)
    moment = timezone.now().replace(microsecond=0)
    Job.objects.filter(name__startswith="bulk-").update(submitted_at=moment)  # ties: the id orders them
    expected = list(Job.objects.filter(team=world.team).order_by("-submitted_at", "-id").values_list("name", flat=True))
    client = api_as(world.member)
    pages = _follow(client, f"{V1}/jobs/?page_size=3", "next")
    assert [j["name"] for page in pages for j in page["results"]] == expected
    assert [len(p["results"]) for p in pages] == [3, 3, 2] and pages[0]["previous"] is None
    back = _follow(client, pages[-1]["previous"], "previous")
    assert [j["name"] for page in reversed(back) for j in page["results"]] == expected[:6]
    assert client.get(back[0]["next"]).json()["results"] == pages[-1]["results"]  # and forward again


def test_job_list_cursor_positions_take_any_offset(world, api_as):
    # An offset Python parses but PostgreSQL refuses: the position is handed to the database in UTC.
    cursor = base64.b64encode(urlencode({"p": "2099-01-01T00:00:00+23:59|9223372036854775807"}).encode()).decode()
    response = api_as(world.member).get(f"{V1}/jobs/", {"cursor": cursor})
    assert response.status_code == 200, response.content
    assert [j["name"] for j in response.json()["results"]] == ["train"]


def test_job_list_cursor_that_names_no_position_is_not_found(world, api_as):
    for position in ("yesterday", "2026-01-01T00:00:00|x", "2026-01-01T00:00:00|7", "9999-12-31T23:00:00-05:00|7",
                     "2026-01-01T00:00:00+00:00|9223372036854775808", "2026-01-01T00:00:00+00:00|-1"):
        cursor = base64.b64encode(urlencode({"p": position}).encode()).decode()
        assert error(api_as(world.member).get(f"{V1}/jobs/", {"cursor": cursor}), 404)["code"] == "not_found"
    for querystring in (b"r=1", b"o=1"):
        cursor = base64.b64encode(querystring).decode()
        assert error(api_as(world.member).get(f"{V1}/jobs/", {"cursor": cursor}), 404)["code"] == "not_found"


def test_job_list_follows_membership_changes_at_once(world, api_as):
    client = api_as(world.member)
    assert [j["name"] for j in client.get(f"{V1}/jobs/").json()["results"]] == ["train"]
    Membership.objects.filter(user=world.member, team=world.team).delete()
    assert client.get(f"{V1}/jobs/").json()["results"] == []
    Membership.objects.create(user=world.member, team=world.other_team, role=Role.VIEWER)
    assert [j["name"] for j in client.get(f"{V1}/jobs/").json()["results"]] == ["eval"]


def test_cancel_and_resubmit(world, api_as):
    url = f"{V1}/jobs/{world.job.pk}/"
    error(api_as(world.viewer).post(url + "cancel/"), 403)
    assert "Only a finished" in error(api_as(world.member).post(url + "resubmit/"), 409)["message"]
    body = api_as(world.member).post(url + "cancel/").json()
    assert body["cancel_requested_at"] is not None
    Job.objects.filter(pk=world.job.pk).update(state=JobState.CANCELLED)
    assert "already cancelled" in error(api_as(world.member).post(url + "cancel/"), 409)["message"]
    again = api_as(world.admin).post(url + "resubmit/")
    assert again.status_code == 201
    assert (again.json()["resubmit_of"], again.json()["submitted_by"]) == (world.job.pk, "ada")


def test_yaml_and_why_waiting(world, api_as):
    client = api_as(world.viewer)
    documents = list(yaml.safe_load_all(client.get(f"{V1}/jobs/{world.job.pk}/yaml/").json()["yaml"]))
    assert {d["kind"] for d in documents} >= {"Job"}
    assert all(d["metadata"]["namespace"] == "nlp" for d in documents)
    Job.objects.filter(pk=world.job.pk).update(state=JobState.QUEUED, state_message="quota exhausted")
    body = client.get(f"{V1}/jobs/{world.job.pk}/why-waiting/").json()
    assert body["state"] == "queued" and body["message"].startswith("Waiting for 8 nvidia.com/gpu")
    assert "Scheduler: quota exhausted" in body["message"] and body["ahead"] == []


def test_logs_from_the_cluster(world, api_as, sandbox):
    world.cluster.server = sandbox.url
    world.cluster.save()
    namespace = world.team.namespace
    sandbox.store.create(sandbox.store.kind("v1", "Namespace"), {"metadata": {"name": namespace}})
    sandbox.store.create(sandbox.store.kind("v1", "Pod"), {
        "metadata": {"name": "train-worker-0", "labels": {"gpu-portal.io/job": str(world.job.pk)}},
        "spec": {"containers": [{"name": "main", "image": "ghcr.io/acme/train:1"}]},
        "status": {"phase": "Running"}}, namespace)
    sandbox.store.set_log(namespace, "train-worker-0", "epoch 1 loss 0.9\nepoch 2 loss 0.7\n")
    pods = api_as(world.member).get(f"{V1}/jobs/{world.job.pk}/logs/").json()["pods"]
    assert [(p["name"], p["log"]) for p in pods] == [("train-worker-0", "epoch 1 loss 0.9\nepoch 2 loss 0.7\n")]
    assert pods[0]["phase"]


def test_logs_when_the_cluster_cannot_be_read_is_503(world, api_as):
    # The factory's cluster URL has nothing listening: the failure is shown, not swallowed or a 500.
    assert error(api_as(world.member).get(f"{V1}/jobs/{world.job.pk}/logs/"), 503)["code"] == "cluster_unavailable"


# --- the error shape everywhere ---------------------------------------------------------------------------------


def test_unknown_method_and_route(world, api_as):
    assert error(api_as(world.member).delete(f"{V1}/jobs/"), 405)["code"] == "method_not_allowed"
    assert error(api_as(world.member).get(f"{V1}/jobs/", {"cursor": "garbage"}), 404)["code"] == "not_found"


def test_schema_and_docs_are_served_by_the_portal(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/jobs/" in schema.content
    for path in ("/api/docs/", "/api/redoc/"):
        page = client.get(path).content.decode()
        assert "/static/drf_spectacular_sidecar/" in page and "cdn" not in page.lower()
    asset = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert asset.status_code == 200


def test_the_job_page_and_the_api_show_the_same_yaml_without_anchors(world, api_as, client):
    text = api_as(world.viewer).get(f"{V1}/jobs/{world.job.pk}/yaml/").json()["yaml"]
    assert "&id" not in text and "*id" not in text
    client.force_login(world.viewer)
    page = client.get(f"/jobs/{world.job.pk}/").content.decode()
    assert escape(text) in page


@pytest.mark.parametrize("demotion", ["viewer", "removed"])
def test_a_demoted_requester_or_submitter_can_no_longer_act(world, api_as, client, demotion):
    """Roles are read at the moment of the write: a member who made a request or submitted a job, then became a
    viewer (or left), can no longer withdraw or cancel it, from a page or through the API."""
    membership = Membership.objects.get(team=world.team, user=world.member)
    if demotion == "viewer":
        membership.role = Role.VIEWER
        membership.save()
    else:
        membership.delete()
    refused = 403 if demotion == "viewer" else 404  # someone no longer in the team does not see its rows
    error(api_as(world.member).post(f"{V1}/quota-requests/{world.quota_request.pk}/withdraw/"), refused)
    error(api_as(world.member).post(f"{V1}/jobs/{world.job.pk}/cancel/"), refused)
    client.force_login(world.member)
    client.post(reverse("quotas:request-withdraw", args=[world.quota_request.pk]))
    client.post(reverse("jobs:job-action", args=[world.job.pk, "cancel"]))
    world.quota_request.refresh_from_db()
    world.job.refresh_from_db()
    assert world.quota_request.state == RequestState.PENDING
    assert world.job.cancel_requested_at is None
    # The team's admin still can.
    assert api_as(world.admin).post(f"{V1}/quota-requests/{world.quota_request.pk}/withdraw/").status_code == 200
