"""Editing a flavor's capacity says what it does to the teams' guarantees before it is saved."""

import re

import pytest
from django.urls import reverse

from tests.factories import ClusterFactory, GpuFlavorFactory, TeamFactory

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def test_the_effect_follows_the_typed_capacity(admin_client):
    from quotas.models import Quota

    flavor = GpuFlavorFactory(cluster=ClusterFactory(overcommit="1.00"), name="h100", capacity=32)
    Quota.objects.create(team=TeamFactory(slug="nlp"), flavor=flavor, guaranteed=24, burst=8)
    page = text(admin_client.get(reverse("quotas:flavor-edit", args=[flavor.pk])))
    assert "With a capacity of 32 : teams' guarantees may add up to 32" in page
    assert "they add up to 24 now, so 8 units remain for new approvals" in page

    url = reverse("quotas:flavor-effect", args=[flavor.pk])
    lower = text(admin_client.get(url, {"capacity": "20"}))
    assert "Changing the capacity from 32 to 20" in lower and "-4 units remain" in lower
    assert "would exceed what the flavor can give by 4" in lower
    assert "running jobs are not stopped" in lower
    assert "Changing" not in text(admin_client.get(url, {"capacity": "x"}))  # not a number: the current one
