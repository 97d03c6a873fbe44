"""Schemathesis against the portal's own OpenAPI schema, in-process over WSGI, as a user of each role with a real
token, with every check schemathesis has (its `--checks all`): for every operation, generated inputs must never
cause a 5xx; every response must match the schema (status codes, content types, headers, bodies, including the one
error shape); input the schema forbids must be refused and input it allows must not be (so the schema states every
rule the API enforces); requests without credentials must be refused; methods it does not list must be 405s."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.api.world import build_world, token_for

load_all_checks()
ROLES = ["platform_admin", "admin", "member", "viewer"]

# Rules a schema cannot state because they depend on stored data or join two values: per operation, the fields a
# 400 may name for a request the schema allows. A 400 naming any other field is a rule the schema left out.
STORED_STATE_FIELDS = {
    "POST /api/v1/jobs/": {"flavor", "cluster", "priority", "priority_tier", "workers", "gpus_per_worker", "env",
                           "command", "team"},  # flavor/tier exist, quota and node fit; env names; a Ray entrypoint;
    # no team named by someone who submits for several
    "POST /api/v1/quota-requests/": {"flavor_id", "flavor", "ends_at"},  # offered to the team; in the future
    "POST /api/v1/teams/{slug}/members/": {"username"},  # an active user of that name
    "GET /api/v1/teams/{slug}/usage/": {"start", "end"},  # a real day; end after start, within 366 days
    "GET /api/v1/calendar/": {"flavor", "cluster"},  # a flavor of that name (in that cluster)
    # a flavor offered to the team; starts in the future, ends after it starts; units within the flavor's capacity
    "POST /api/v1/reservations/": {"flavor", "cluster", "starts_at", "ends_at", "units"},
    "GET /api/v1/quota-requests/{id}/impact/": set(),
    "POST /api/v1/jobs/{id}/progress/": {"done"},  # at most total: a rule joining two values
    # As a job's run, plus: an image the platform offers (a setting), a name not taken in the team.
    "POST /api/v1/workspaces/": {"flavor", "cluster", "priority", "priority_tier", "gpus", "cpu", "memory_gib",
                                 "image", "name", "team"},
}


def positive_data_acceptance_beyond_stored_state(ctx, response, case):
    """Schemathesis' positive_data_acceptance, except for a 400 that names only fields whose rules depend on stored
    data (STORED_STATE_FIELDS)."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        allowed = STORED_STATE_FIELDS.get(case.operation.label)
        fields = set(response.json()["error"]["fields"]) if response.status_code == 400 else None
        if allowed is not None and fields and fields <= allowed:
            return None
        raise


ALL_CHECKS = [positive_data_acceptance_beyond_stored_state if check is positive_data_acceptance else check
              for check in CHECKS.get_all()]
assert positive_data_acceptance_beyond_stored_state in ALL_CHECKS


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """Requests run in the test's own transaction (as with Django's test client): the WSGI handler must not close
    that connection when a request ends."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def tokens(db):
    world = build_world()
    return {role: token_for(getattr(world, role)) for role in ROLES}


@pytest.fixture(params=["member", "platform_admin"])
def deep_role_token(request, tokens):
    return tokens[request.param]


@pytest.fixture(params=["admin", "viewer"])
def light_role_token(request, tokens):
    return tokens[request.param]


# Loaded at collection: serving the schema reads no database rows. As a member (who submits and withdraws) and a
# platform admin (who decides) every phase runs, including the coverage phase's boundary values of each field;
# as a team admin and a viewer (whose writes are mostly 403s) the examples and the fuzzing phase, to stay fast.
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
NO_COVERAGE_PHASE = SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}})
light_schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application(), config=NO_COVERAGE_PHASE)
SETTINGS = {"deadline": None, "derandomize": True, "database": None,
            "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                      HealthCheck.filter_too_much]}


@schema.parametrize()
@settings(max_examples=6, **SETTINGS)
def test_api_conforms_and_never_fails(case, deep_role_token):
    case.call_and_validate(headers={"Authorization": f"Bearer {deep_role_token}"}, checks=ALL_CHECKS)


@light_schema.parametrize()
@settings(max_examples=4, **SETTINGS)
def test_api_conforms_and_never_fails_for_other_roles(case, light_role_token):
    case.call_and_validate(headers={"Authorization": f"Bearer {light_role_token}"}, checks=ALL_CHECKS)
