"""Bad input on every class of endpoint answers a 4xx in the one error shape, never a 500: forged cursors on every
list, bodies nested too deep or too large, query parameters the schema does not allow, months and dates out of
range (in the API and on the usage pages)."""

import base64
import json
from urllib.parse import urlencode

import pytest
from django.test import Client, override_settings

from tests.api.test_endpoints import error, submit_body

pytestmark = pytest.mark.django_db
V1 = "/api/v1"

LISTS = ["teams/", "teams/nlp/members/", "teams/nlp/quotas/", "clusters/", "flavors/", "quota-requests/", "jobs/"]
WRITES = [("post", "teams/nlp/members/"), ("patch", "teams/nlp/members/erin/"), ("post", "quota-requests/"),
          ("post", "jobs/"), ("post", "quota-requests/{qr}/approve/"), ("post", "quota-requests/{qr}/reject/")]


def cursor(**params) -> str:
    return base64.b64encode(urlencode(params).encode()).decode()


def nested(depth: int) -> bytes:
    return b'{"name": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("position", ["not a number", "9" * 400, "\x00", "2026-01-01|x|y"])
def test_a_forged_cursor_is_an_invalid_cursor_on_every_list(world, api_as, path, position):
    response = api_as(world.platform_admin).get(f"{V1}/{path}", {"cursor": cursor(p=position, r="1")})
    assert error(response, 404)["code"] == "not_found"


@pytest.mark.parametrize("path", LISTS)
def test_an_honest_cursor_still_pages(world, api_as, path):
    client = api_as(world.platform_admin)
    first = client.get(f"{V1}/{path}", {"page_size": 1}).json()
    assert len(first["results"]) == 1
    if first["next"]:
        assert client.get(first["next"]).status_code == 200


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("page_size", ["null", "0", "-1", "201", "abc", "1.5", ""])
def test_a_page_size_that_is_no_whole_number_from_1_to_200_is_refused(world, api_as, path, page_size):
    response = api_as(world.platform_admin).get(f"{V1}/{path}", {"page_size": page_size})
    assert error(response, 400)["fields"] == {"page_size": ["A whole number from 1 to 200."]}


@pytest.mark.parametrize("path", ["teams/", "flavors/", "jobs/", "quota-requests/"])
def test_a_nul_character_in_a_query_parameter_is_refused(world, api_as, path):
    response = api_as(world.platform_admin).get(f"{V1}/{path}", {"cluster": "east\x00", "team": "n\x00lp"})
    assert error(response, 400)["code"] == "invalid"


@pytest.mark.parametrize("method,path", WRITES)
def test_a_body_nested_too_deep_is_a_400(world, api_as, method, path):
    client = api_as(world.platform_admin)
    url = f"{V1}/{path.format(qr=world.quota_request.pk)}"
    for depth in (65, 100_000):
        response = getattr(client, method)(url, nested(depth), content_type="application/json")
        assert "nested deeper than 32 levels" in error(response, 400)["message"], depth
    # Nesting within the limit parses, and the field is judged on its merits.
    response = getattr(client, method)(url, nested(10), content_type="application/json")
    assert response.status_code < 500


@pytest.mark.parametrize("method,path", WRITES)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=64 * 1024)
def test_a_body_over_the_upload_limit_is_a_413_in_the_error_shape(world, api_as, method, path):
    client = api_as(world.platform_admin)
    url = f"{V1}/{path.format(qr=world.quota_request.pk)}"
    body = json.dumps({"justification": "x" * (65 * 1024)})
    response = getattr(client, method)(url, body, content_type="application/json")
    assert error(response, 413)["code"] == "too_large"
    assert "65536 bytes" in error(response, 413)["message"]


def test_a_body_over_the_limit_without_a_length_is_still_refused(world, api_as):
    """A body whose length is not declared up front (chunked) is read only up to the limit."""
    client = api_as(world.platform_admin)
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024):
        response = client.generic("POST", f"{V1}/jobs/", json.dumps(submit_body(name="x" * 2000)),
                                  content_type="application/json", CONTENT_LENGTH="")
    # Without a length, Django hands the view an empty body: a 400 for missing fields, never a 500 or a read
    # of the whole stream.
    assert response.status_code == 400


def test_session_writes_over_the_limit_are_a_413_too(world):
    client = Client(enforce_csrf_checks=False)
    client.force_login(world.admin)
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024):
        response = client.post(f"{V1}/teams/nlp/members/", json.dumps({"username": "x" * 4000}),
                               content_type="application/json")
    assert error(response, 413)["code"] == "too_large"


@pytest.mark.parametrize("month", ["9999-12", "1999-12", "3000-01", "2026-13", "2026-00"])
def test_months_out_of_range_are_a_400_in_the_api(world, api_as, month):
    client = api_as(world.admin)
    assert error(client.get(f"{V1}/teams/nlp/budget/", {"month": month}), 400)["fields"]["month"]
    assert error(client.get(f"{V1}/teams/nlp/statements/{month}/"), 400)["fields"]["month"]


@pytest.mark.parametrize("params", [{"start": "9999-12-31"}, {"start": "0001-01-01", "end": "0001-01-02"},
                                    {"end": "9999-12-31"}, {"start": "2026-02-30"}, {"start": "3000-01-01"},
                                    {"start": "2026-01-01", "end": "2028-01-01"}])
def test_usage_dates_out_of_range_are_a_400(world, api_as, params):
    response = api_as(world.member).get(f"{V1}/teams/nlp/usage/", params)
    fields = error(response, 400)["fields"]
    assert set(fields) <= {"start", "end"} and fields


@pytest.mark.parametrize("params", [{"submitted_after": "9999-12-31T23:59:59-23:59"},
                                    {"submitted_before": "0001-01-01T00:00:00+23:59"},
                                    {"submitted_after": "2026-02-30T00:00:00Z"}])
def test_job_filter_times_out_of_range_are_a_400(world, api_as, params):
    fields = error(api_as(world.member).get(f"{V1}/jobs/", params), 400)["fields"]
    assert set(fields) == set(params)


@pytest.mark.parametrize("ends_at", ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-01-01T00:00:00+23:59"])
def test_quota_request_end_dates_out_of_range_are_a_400(world, api_as, ends_at):
    body = {"team": "nlp", "flavor_id": world.flavor.pk, "guaranteed_units": 1, "justification": "A long enough why",
            "ends_at": ends_at}
    assert "ends_at" in error(api_as(world.member).post(f"{V1}/quota-requests/", body, format="json"), 400)["fields"]


@pytest.mark.parametrize("month", ["9999-12", "0001-01", "1999-12", "3000-01"])
def test_usage_pages_take_a_month_out_of_range_as_a_message_or_a_404(world, client, month):
    client.force_login(world.platform_admin)
    for url in (f"/teams/nlp/usage/?month={month}", f"/console/usage/?month={month}"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "is not a month" in response.content.decode()
    for url in (f"/teams/nlp/usage/statements/{month}/", f"/teams/nlp/usage/statements/{month}.csv",
                f"/console/usage/statements/{month}.csv"):
        assert client.get(url).status_code == 404, url
