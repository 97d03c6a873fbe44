"""The evidence page and endpoint of a quota request, the right-sizing table and its one-click quota change."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from billing.evidence import window
from quotas.models import Quota, QuotaLevel
from tenants.records import AuditEvent
from tests.factories import (
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    RateCardFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UsageHourFactory,
)
from tests.quotas.factories import QuotaRequestFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    team = TeamFactory(slug="ml-research")
    flavor = GpuFlavorFactory(name="h100", capacity=32)
    TeamNamespaceFactory(team=team, cluster=flavor.cluster)
    RateCardFactory(flavor=flavor, price_per_gpu_hour=2, effective_from=timezone.now() - timedelta(days=400))
    Quota.objects.create(team=team, flavor=flavor, guaranteed=16, burst=0)
    QuotaLevel.objects.create(team=team, flavor=flavor, guaranteed=16, burst=0,
                              since=timezone.now() - timedelta(days=100))
    start, _ = window()
    for h in range(48):
        UsageHourFactory(team=team, flavor=flavor, hour=start + timedelta(hours=h), allocated_gpu_hours=8,
                         used_gpu_hours=4)
    admin = MembershipFactory(team=team, role="admin").user
    member = MembershipFactory(team=team, role="member").user
    request = QuotaRequestFactory(team=team, flavor=flavor, guaranteed=24, burst=0, requested_by=member)
    return {"team": team, "flavor": flavor, "admin": admin, "member": member, "request": request,
            "platform": PlatformAdminFactory()}


def test_the_requester_and_the_approver_see_the_evidence(client, world):
    for user in (world["member"], world["platform"]):
        client.force_login(user)
        page = client.get(reverse("billing:request-evidence", args=[world["request"].pk]))
        assert page.status_code == 200
        text = page.content.decode()
        assert 'id="evidence-sentence"' in text and "ml-research used 50 % of its 16 h100 units at p95 (8 held)" in text
        assert 'id="evidence-chart"' in text


def test_the_api_gives_the_figures_and_the_hours(world):
    api = APIClient()
    api.force_authenticate(world["member"])
    body = api.get(f"/api/v1/quota-requests/{world['request'].pk}/evidence/").json()
    assert body["allocated_unit_hours"] == "384.000000" and body["used_unit_hours"] == "192.000000"
    assert body["idle_share"] == "0.5000" and body["idle_cost"] == "384.00"
    assert body["waited_gpu_hours"] == {"quota": "0.000000", "placement": "0.000000", "budget": "0.000000"}
    assert len(body["hours"]) == 720 and body["hours"][0]["allocated_units"] == "8.000000"


def test_rightsizing_rows_and_the_prefilled_change(client, world):
    client.force_login(world["admin"])
    page = client.get(reverse("billing:rightsizing"))
    assert page.status_code == 200 and 'data-team="ml-research"' in page.content.decode()
    assert "Set 4" not in page.content.decode()  # only platform admins get the button
    client.force_login(world["member"])
    assert client.get(reverse("billing:rightsizing")).status_code == 403
    client.force_login(world["platform"])
    page = client.get(reverse("billing:rightsizing")).content.decode()
    url = reverse("quotas:quota-set", args=["ml-research", world["flavor"].pk])
    # 48 of the 720 hours held 8 (the top 48: p95 is 8), half of it idle: 4 recommended.
    assert f'{url}?guaranteed=4' in page
    form = client.get(f"{url}?guaranteed=4")
    assert form.context["form"].initial["guaranteed"] == 4 and form.context["form"].initial["cpu_cores"] == 0
    done = client.post(url, {"guaranteed": 4, "burst": 2, "cpu_cores": 0, "memory_gib": 0, "storage_gib": 0})
    assert done.status_code == 302
    assert Quota.objects.get(team=world["team"], flavor=world["flavor"]).guaranteed == 4
    assert AuditEvent.objects.filter(action="quota.set").count() == 1
    assert QuotaLevel.objects.filter(team=world["team"]).order_by("-since").first().guaranteed == 4


def test_the_prefilled_change_is_capacity_checked(client, world):
    client.force_login(world["platform"])
    url = reverse("quotas:quota-set", args=["ml-research", world["flavor"].pk])
    refused = client.post(url, {"guaranteed": 40, "burst": 0, "cpu_cores": 0, "memory_gib": 0, "storage_gib": 0})
    assert refused.status_code == 400 and "exceeds" in refused.content.decode()
    assert Quota.objects.get(team=world["team"], flavor=world["flavor"]).guaranteed == 16


def test_rightsizing_api_scoped(world):
    api = APIClient()
    api.force_authenticate(world["admin"])
    rows = api.get("/api/v1/rightsizing/").json()
    assert [(r["team"], r["flavor"], r["guaranteed_units"], r["recommended_guaranteed_units"]) for r in rows] == [
        ("ml-research", "h100", 16, 4)]
    assert rows[0]["monthly_cost_change"] == "-17520.00" and rows[0]["verdict"] == "over-provisioned"
    api.force_authenticate(world["member"])
    assert api.get("/api/v1/rightsizing/").status_code == 403
