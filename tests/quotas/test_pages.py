"""The quota pages' writes: a valid form goes through the service and back with a message; a service refusal is
shown beside the form that was typed."""

import json

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from quotas.choices import RequestState
from quotas.models import QuotaRequest
from tenants.choices import TeamState
from tenants.models import PriorityTier
from tests.api.world import build_world


@pytest.fixture
def world(db):
    return build_world()


def without_pending(world):
    """A team may have one pending request per flavor: clear the world's, so the test can send one."""
    QuotaRequest.objects.filter(flavor=world.flavor, state=RequestState.PENDING).delete()
    return world


def request_data(world, **overrides):
    return {"flavor": world.flavor.pk, "guaranteed": 4, "burst": 0, "storage_gib": 0,
            "justification": "Fine-tuning for the spring release", **overrides}


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_quota_request_from_the_page_is_sent_and_said(client, world):
    without_pending(world)
    client.force_login(world.member)
    response = client.post(reverse("quotas:request-create", args=["nlp"]), request_data(world))
    created = QuotaRequest.objects.latest("pk")
    assert response.status_code == 302 and response["Location"] == reverse("quotas:team-quota", args=["nlp"])
    assert said(response) == [f"Request #{created.pk} sent to the platform team."]
    assert (created.team, created.guaranteed, created.requested_by) == (world.team, 4, world.member)


def test_a_refused_quota_request_keeps_the_form_with_the_reason(client, world):
    without_pending(world)
    world.team.state = TeamState.SUSPENDED
    world.team.save(update_fields=["state"])
    before = QuotaRequest.objects.count()
    client.force_login(world.member)
    response = client.post(reverse("quotas:request-create", args=["nlp"]), request_data(world))
    assert response.status_code in (200, 400)
    assert "it cannot request quota" in response.content.decode()
    assert response.context["form"]["justification"].value() == "Fine-tuning for the spring release"
    assert QuotaRequest.objects.count() == before


def test_a_flavor_and_a_tier_saved_from_the_console_are_said(client, world):
    client.force_login(world.platform_admin)
    flavor = world.flavor
    response = client.post(reverse("quotas:flavor-edit", args=[flavor.pk]), {
        "cluster": flavor.cluster_id, "name": flavor.name, "resource_name": flavor.resource_name,
        "gpu_model": flavor.gpu_model, "capacity": 72, "gpus_per_node": flavor.gpus_per_node,
        "memory_gb": flavor.memory_gb, "sharing": flavor.sharing, "gpu_fraction": flavor.gpu_fraction,
        "node_labels": json.dumps(flavor.node_labels), "node_taints": "[]", "tolerations": "[]"})
    assert response.status_code == 302 and response["Location"] == reverse("quotas:capacity"), response.content
    assert said(response) == ["Flavor h100 saved."]
    flavor.refresh_from_db()
    assert flavor.capacity == 72
    response = client.post(reverse("quotas:tier-list"), {"name": "urgent", "value": 5000,
                                                          "preemption_policy": "PreemptLowerPriority"})
    assert response.status_code == 302 and said(response)[-1] == "Priority tier urgent saved."
    assert PriorityTier.objects.filter(name="urgent", value=5000).exists()


def test_renewing_prefills_only_from_the_teams_own_request(client, world):
    foreign = QuotaRequest.objects.create(team=world.other_team, flavor=world.flavor, guaranteed=2, burst=0,
                                          justification="Someone else's request", requested_by=world.outsider)
    client.force_login(world.member)
    url = reverse("quotas:request-create", args=["nlp"])
    own = client.get(url, {"renew": world.quota_request.pk}).context["form"]
    assert own["guaranteed"].value() == 16 and own["justification"].value().startswith("Renewal of #")
    other = client.get(url, {"renew": foreign.pk}).context["form"]
    assert other["guaranteed"].value() is None


def test_my_requests_and_recent_decisions_come_from_the_request_selector(client, world):
    client.force_login(world.member)
    mine = client.get(reverse("quotas:request-list")).context["requests"]
    assert [r.pk for r in mine] == [world.quota_request.pk]
    client.force_login(world.admin)
    assert list(client.get(reverse("quotas:request-list")).context["requests"]) == []
    world.quota_request.state = "rejected"
    world.quota_request.save(update_fields=["state"])
    client.force_login(world.platform_admin)
    decided = client.get(reverse("quotas:approval-list")).context["decided"]
    assert [r.pk for r in decided] == [world.quota_request.pk]
