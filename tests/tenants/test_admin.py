"""Django admin changes are audited with the actor, deletes included, and never bypass the services' rules."""

import pytest

from tenants.choices import Role
from tenants.models import AuditEvent, Cluster, GpuFlavor, Membership, Team
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PriorityTierFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db


def bulk_delete(client, model: str, pks: list[int]):
    return client.post(f"/django-admin/tenants/{model}/", {"action": "delete_selected", "post": "yes",
                                                           "_selected_action": [str(pk) for pk in pks]})


def test_bulk_delete_of_flavors_is_audited_per_row_and_reconciles_the_cluster(admin_client):
    cluster = ClusterFactory()
    flavors = [GpuFlavorFactory(cluster=cluster) for _ in range(2)]
    generation = cluster.generation
    response = bulk_delete(admin_client, "gpuflavor", [f.pk for f in flavors])
    assert response.status_code == 302 and not GpuFlavor.objects.exists()
    events = AuditEvent.objects.filter(action="gpuflavor.delete")
    assert sorted(events.values_list("object_id", flat=True)) == sorted(str(f.pk) for f in flavors)
    assert {e.actor for e in events} == {admin_client.admin}
    assert events.first().before["resource_name"] == "nvidia.com/gpu"
    assert Cluster.objects.get(pk=cluster.pk).generation == generation + len(flavors)  # one nudge per row


def test_deleting_a_team_or_a_tier_from_its_page_is_audited(admin_client):
    team, tier = TeamFactory(), PriorityTierFactory()
    assert admin_client.post(f"/django-admin/tenants/team/{team.pk}/delete/", {"post": "yes"}).status_code == 302
    assert admin_client.post(f"/django-admin/tenants/prioritytier/{tier.pk}/delete/",
                             {"post": "yes"}).status_code == 302
    assert not Team.objects.filter(pk=team.pk).exists()
    assert set(AuditEvent.objects.filter(actor=admin_client.admin).values_list("action", "object_repr")) == {
        ("team.delete", str(team)), ("prioritytier.delete", str(tier))}


def test_membership_deletes_in_the_admin_keep_the_last_admin_and_are_audited(admin_client):
    team = TeamFactory()
    only_admin = MembershipFactory(team=team, role=Role.ADMIN)
    member = MembershipFactory(team=team, role=Role.MEMBER)
    bulk_delete(admin_client, "membership", [only_admin.pk, member.pk])
    assert list(Membership.objects.filter(team=team)) == [only_admin]
    event = AuditEvent.objects.get(action="membership.remove")
    assert event.actor == admin_client.admin and event.before["user"] == member.user.username


@pytest.mark.parametrize("model", ["quota", "quotarequest"])
def test_quotas_and_requests_cannot_be_deleted_in_the_admin(admin_client, model):
    response = admin_client.get(f"/django-admin/quotas/{model}/")
    assert response.status_code == 200 and "delete_selected" not in response.text
