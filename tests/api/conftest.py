import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from tests.api.world import build_world, token_for


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    # Throttle counters live in the cache; a test starts with none from the one before.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def world(db):
    return build_world()


@pytest.fixture
def api_as():
    """api_as(user) → an APIClient sending that user's new personal access token (None: no credentials)."""

    def make(user):
        client = APIClient()
        if user is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(user)}")
        return client

    return make
