""""In use" per flavor on a Volcano cluster whose flavors share a resource name: Volcano's Queue and the
ResourceQuota count per resource, so each flavor showed their sum (a100 33 of 24 and l40s 33 of 24 while running
jobs held 24 and 9); the jobs placed on each flavor tell them apart."""

import pytest

from jobs.models import Job
from quotas import selectors
from quotas import services as quota_services
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("scheduler", ["volcano", "kueue"])
def test_flavors_of_one_resource_name_each_show_their_own_jobs(scheduler, admin_client):
    cluster = ClusterFactory(name="gpu-west", scheduler=scheduler, cohort="" if scheduler == "volcano" else "gpu")
    a100 = GpuFlavorFactory(cluster=cluster, name="a100", capacity=24)
    l40s = GpuFlavorFactory(cluster=cluster, name="l40s", capacity=24)
    team = TeamFactory(slug="vision")
    user = MembershipFactory(team=team).user
    status = {"allocated": {"nvidia.com/gpu": 33}, "used": {"nvidia.com/gpu": 33}}
    if scheduler == "kueue":  # Kueue counts per flavor itself
        status["flavors"] = {"a100": {"nvidia.com/gpu": 24}, "l40s": {"nvidia.com/gpu": 9}}
    TeamNamespaceFactory(team=team, cluster=cluster, quota_status=status)
    admin, tier = PlatformAdminFactory(), PriorityTierFactory(name="standard", is_default=True)
    for flavor in (a100, l40s):
        quota_services.quota_set(actor=admin, team=team, flavor=flavor, guaranteed=12, burst=12)
    for flavor, gpus, state in ((a100, 16, "running"), (a100, 8, "admitted"), (l40s, 9, "running"),
                                (l40s, 4, "queued")):
        Job.objects.create(team=team, cluster=cluster, flavor=flavor, priority_tier=tier, kind="batch", name="j",
                           image="x:1", command=["x"], workers=1, gpus_per_worker=gpus, submitted_by=user,
                           state=state)
    overview = {u.flavor.name: u.in_use for u in selectors.capacity_overview(cluster=cluster)}
    assert overview == {"a100": 24, "l40s": 9}
    held = {h.quota.flavor.name: h.in_use for h in selectors.team_held_quotas(team=team)}
    assert held == {"a100": 24, "l40s": 9}
    # Fair sharing shows each flavor's units apart rather than adding a100s and l40s into one "Guaranteed 24".
    page = admin_client.get("/console/capacity/").content.decode()
    row = page[page.index('data-team="vision"'):]
    row = row[:row.index("</tr>")]
    assert '<span class="nowrap">a100 12</span><br><span class="nowrap">l40s 12</span>' in row
    assert '<span class="nowrap">a100 24</span><br><span class="nowrap">l40s 9</span>' in row


def test_a_team_of_one_flavor_names_it_too(admin_client):
    cluster = ClusterFactory(name="gpu-west", scheduler="volcano", cohort="")
    a100 = GpuFlavorFactory(cluster=cluster, name="a100", capacity=24)
    team = TeamFactory(slug="vision")
    TeamNamespaceFactory(team=team, cluster=cluster)
    quota_services.quota_set(actor=PlatformAdminFactory(), team=team, flavor=a100, guaranteed=8, burst=0)
    page = admin_client.get("/console/capacity/").content.decode()
    row = page[page.index('data-team="vision"'):]
    row = row[:row.index("</tr>")]
    assert '<td class="num by-flavor"><span class="nowrap">a100 8</span></td>' in row  # not a bare "8"
