"""Each team's share beside its weight: Kueue's weighted dominant resource share (kueue v0.19.2
pkg/cache/scheduler/fair_sharing.go) and Volcano proportion's deal by weight (volcano v1.15.1
pkg/scheduler/plugins/proportion/proportion.go), computed from what the clusters report."""

from fractions import Fraction

import pytest
from django.urls import reverse

from quotas.fair_share import fair_shares, kueue_share, proportion_deserved
from quotas.models import Quota
from tenants.models import AuditEvent, GpuFlavor, Team, TeamNamespace
from tests.factories import ClusterFactory, PlatformAdminFactory, TeamFactory, UserFactory


def test_kueue_share_is_the_borrowed_part_of_the_cohort_per_mille_over_the_weight():
    # 6 GPUs above nominal in a cohort that could lend 16: 375 ‰; weight 3 makes it 125.
    assert kueue_share(borrowed={"nvidia.com/gpu": 6}, lendable={"nvidia.com/gpu": 16}, weight=1) == 375
    assert kueue_share(borrowed={"nvidia.com/gpu": 6}, lendable={"nvidia.com/gpu": 16}, weight=3) == 125
    assert kueue_share(borrowed={"nvidia.com/gpu": 1}, lendable={"nvidia.com/gpu": 3}, weight=1) == 334  # rounded up
    assert kueue_share(borrowed={}, lendable={"nvidia.com/gpu": 16}, weight=1) == 0
    # The dominant resource decides.
    assert kueue_share(borrowed={"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 7},
                       lendable={"nvidia.com/gpu": 10, "nvidia.com/mig-1g.10gb": 14}, weight=1) == 500


def test_proportion_deals_the_cluster_by_weight_within_guarantee_and_capability():
    # 24 GPUs, guarantees 4 + 4: the 16 left go 3:1 until team-b's capability (8) stops it; the rest to team-a.
    deal = proportion_deserved(total=24, queues={"a": (3, 4, 20), "b": (1, 4, 8)})
    assert deal == {"a": Fraction(16), "b": Fraction(8)}
    deal = proportion_deserved(total=24, queues={"a": (3, 4, 24), "b": (1, 4, 24)})
    assert deal == {"a": Fraction(16), "b": Fraction(8)}
    assert proportion_deserved(total=8, queues={"a": (1, 4, 8), "b": (1, 4, 8)}) == {"a": 4, "b": 4}


@pytest.fixture
def busy_cohort(db):
    cluster = ClusterFactory(name="east", cohort="gpu-east")
    flavor = GpuFlavor.objects.create(cluster=cluster, name="h100", capacity=16)
    teams = []
    for slug, weight, used in (("vision", 3, 10), ("speech", 1, 6)):
        team = TeamFactory(slug=slug, name=slug.title(), fair_share_weight=weight)
        Quota.objects.create(team=team, flavor=flavor, guaranteed=8 if slug == "vision" else 4, burst=8)
        TeamNamespace.objects.update_or_create(team=team, cluster=cluster, defaults={
            "quota_status": {"flavors": {"h100": {"nvidia.com/gpu": used}}}})
        teams.append(team)
    return cluster, teams


def test_console_shows_each_share_beside_its_weight_and_sets_the_weight(client, busy_cohort):
    cluster, (vision, speech) = busy_cohort
    admin = PlatformAdminFactory()
    client.force_login(admin)
    page = client.get(reverse("quotas:capacity")).content.decode()
    assert 'data-team="vision"' in page and 'data-team="speech"' in page

    rows = {row.team.slug: row for row in fair_shares(cluster=cluster)}
    # Cohort nominal 12; vision borrows 2 (weight 3): ceil(2000/12/3) = 56; speech borrows 2 (weight 1): 167.
    assert (rows["vision"].share, rows["speech"].share) == (56, 167)
    response = client.post(reverse("quotas:team-weight", args=["speech"]), {"weight": "4"})
    assert response.status_code == 302
    assert Team.objects.get(pk=speech.pk).fair_share_weight == 4
    assert AuditEvent.objects.filter(action="team.fair_share_weight", object_id=str(speech.pk)).exists()
    bad = client.post(reverse("quotas:team-weight", args=["speech"]), {"weight": "0"}, follow=True)
    assert "greater than or equal to 1" in bad.content.decode()
    assert Team.objects.get(pk=speech.pk).fair_share_weight == 4


def test_only_platform_admins_set_weights(client, busy_cohort):
    client.force_login(UserFactory())
    assert client.post(reverse("quotas:team-weight", args=["speech"]), {"weight": "9"}).status_code == 403
    assert Team.objects.get(slug="speech").fair_share_weight == 1
