"""Schemathesis against the portal's own OpenAPI schema, in-process over WSGI, with a member's real token: for
every operation, generated inputs (valid and invalid) must never cause a 5xx, and every response must match the
schema (status codes, content types, bodies, including the one error shape)."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.world import build_world, token_for

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


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
def member_token(db):
    world = build_world()
    return token_for(world.member)


# Loaded at collection: serving the schema reads no database rows.
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


@schema.parametrize()
@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_api_conforms_and_never_fails(case, member_token):
    case.call_and_validate(headers={"Authorization": f"Bearer {member_token}"}, checks=CHECKS)
