"""The capacity invariant (Σ guaranteed of active teams ≤ capacity × overcommit) on every path that can break it,
each refusal saying why; and a time-boxed grant giving back the whole previous grant."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from quotas import services
from quotas.models import Quota
from tenants import services as tenant_services
from tenants.choices import Role, TeamState
from tenants.models import GpuFlavor
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    TeamFactory,
    TeamNamespaceFactory,
)
from tests.quotas.factories import QuotaFactory, QuotaRequestFactory

pytestmark = pytest.mark.django_db


def total(flavor) -> int:
    return sum(q.guaranteed for q in Quota.objects.filter(flavor=flavor, team__state=TeamState.ACTIVE))


@pytest.fixture
def flavor():
    return GpuFlavorFactory(name="h100", capacity=24, cluster=ClusterFactory(overcommit=1))


def team_with(flavor, guaranteed, **extra):
    team = TeamFactory()
    TeamNamespaceFactory(team=team, cluster=flavor.cluster)
    return QuotaFactory(team=team, flavor=flavor, guaranteed=guaranteed, burst=0, **extra)


def test_an_expiring_grant_takes_back_only_what_still_fits(flavor, mailoutbox, run_on_commit):
    # A team with 10 lent itself down to 2 for a while; meanwhile 20 of the 24 went to others.
    quota = team_with(flavor, 2, expires_at=timezone.now() - timedelta(seconds=1), revert_guaranteed=10,
                      revert_burst=4)
    MembershipFactory(team=quota.team, role=Role.ADMIN)
    team_with(flavor, 20)
    with run_on_commit():
        assert services.quota_expire_due() == 1
    quota.refresh_from_db()
    assert quota.guaranteed == 4 and quota.burst == 4 and quota.expires_at is None
    assert total(flavor) == 24
    assert "Only 4 of the 10 guaranteed units came back" in mailoutbox[-1].body


def test_an_expiring_grant_restores_cpu_memory_and_storage(flavor):
    quota = team_with(flavor, 2, cpu_cores=16, memory_gib=128, storage_gib=100)
    request = QuotaRequestFactory(team=quota.team, flavor=flavor, guaranteed=8, burst=0, cpu_cores=64,
                                  memory_gib=512, storage_gib=0, ends_at=timezone.now() + timedelta(days=7))
    services.quota_request_approve(actor=PlatformAdminFactory(), request=request)
    quota.refresh_from_db()
    assert (quota.guaranteed, quota.cpu_cores, quota.memory_gib, quota.storage_gib) == (8, 64, 512, 0)
    Quota.objects.filter(pk=quota.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert services.quota_expire_due() == 1
    quota.refresh_from_db()
    assert (quota.guaranteed, quota.cpu_cores, quota.memory_gib, quota.storage_gib) == (2, 16, 128, 100)


def test_resuming_a_team_is_refused_when_its_guarantees_no_longer_fit(flavor):
    admin = PlatformAdminFactory()
    suspended = team_with(flavor, 8).team
    tenant_services.team_set_state(actor=admin, team=suspended, state=TeamState.SUSPENDED)
    team_with(flavor, 20)  # granted while the team was suspended
    with pytest.raises(ValidationError, match=r"Resuming .* would over-commit: h100 .* 28, more than the 24"):
        tenant_services.team_set_state(actor=admin, team=suspended, state=TeamState.ACTIVE)
    suspended.refresh_from_db()
    assert suspended.state == TeamState.SUSPENDED and total(flavor) == 20
    Quota.objects.filter(team=suspended).update(guaranteed=4)
    tenant_services.team_set_state(actor=admin, team=suspended, state=TeamState.ACTIVE)
    assert total(flavor) == 24


def test_capacity_below_what_is_guaranteed_is_refused_with_the_holders(flavor):
    team_with(flavor, 16)
    team_with(flavor, 6)
    flavor.capacity = 16
    with pytest.raises(ValidationError) as info:
        tenant_services.gpu_flavor_save(actor=PlatformAdminFactory(), flavor=flavor)
    message = info.value.message_dict["capacity"][0]
    assert "allows 16 guaranteed units, but teams already hold 22" in message and "16, " in message
    flavor.refresh_from_db()
    assert flavor.capacity == 24
    flavor.capacity = 22  # exactly what is held: allowed
    tenant_services.gpu_flavor_save(actor=PlatformAdminFactory(), flavor=flavor)


def test_a_lower_overcommit_that_would_over_commit_is_refused(flavor):
    team_with(flavor, 20)
    with pytest.raises(ValidationError) as info:
        tenant_services.cluster_update(actor=PlatformAdminFactory(), cluster=flavor.cluster, overcommit="0.5")
    assert "teams already hold 20" in " ".join(info.value.message_dict["overcommit"])


def test_the_console_and_admin_show_the_refusal_on_the_field(flavor, admin_client):
    team_with(flavor, 20)
    data = {"cluster": flavor.cluster.pk, "name": flavor.name, "resource_name": flavor.resource_name,
            "gpu_model": flavor.gpu_model, "node_labels": "{}", "node_taints": "[]", "tolerations": "[]",
            "capacity": 8, "gpus_per_node": 8, "memory_gb": 80, "gpu_fraction": "1", "sharing": "exclusive"}
    admin_url = f"/django-admin/tenants/gpuflavor/{flavor.pk}/change/"
    for url in (reverse("quotas:flavor-edit", args=[flavor.pk]), admin_url):
        response = admin_client.post(url, data)
        assert response.status_code == 200 and b"teams already hold 20" in response.content, url
        flavor.refresh_from_db()
        assert flavor.capacity == 24


def test_a_flavor_teams_hold_quota_of_cannot_be_removed(flavor):
    team_with(flavor, 4)
    with pytest.raises(Exception, match="protected"):
        tenant_services.admin_object_delete(actor=PlatformAdminFactory(), obj=flavor)
    assert Quota.objects.filter(flavor=flavor).count() == 1


@pytest.mark.parametrize(("scheduler", "refused"), [("kueue", True), ("volcano", False)])
def test_a_kueue_cluster_keeps_its_flavors_within_one_resource_group(scheduler, refused):
    """A team's ClusterQueue lists every flavor it holds in one resource group, with cpu and memory beside each
    GPU resource name: at most 64 flavors and 64 covered resources (the CRD's MaxItems). Volcano has no such
    limit."""
    cluster = ClusterFactory(scheduler=scheduler)
    GpuFlavorFactory.create_batch(64, cluster=cluster)
    extra = GpuFlavorFactory.build(cluster=cluster, name="one-too-many")
    if refused:
        with pytest.raises(ValidationError, match="at most 64 GPU flavors .* this would make 65"):
            tenant_services.gpu_flavor_save(actor=PlatformAdminFactory(), flavor=extra)
    else:
        tenant_services.gpu_flavor_save(actor=PlatformAdminFactory(), flavor=extra)
    # At most 62 GPU resource names beside cpu and memory: 62 more besides nvidia.com/gpu are one too many.
    for number, flavor in enumerate(GpuFlavor.objects.filter(cluster=cluster).order_by("pk")[:62]):
        GpuFlavor.objects.filter(pk=flavor.pk).update(resource_name=f"example.com/gpu-{number}")
    last = GpuFlavor.objects.filter(cluster=cluster).order_by("pk")[61]
    last.memory_gb = 40
    if refused:
        with pytest.raises(ValidationError, match="at most 62 GPU resource names .* this would make 63"):
            tenant_services.gpu_flavor_save(actor=PlatformAdminFactory(), flavor=last)
    else:
        tenant_services.gpu_flavor_save(actor=PlatformAdminFactory(), flavor=last)
