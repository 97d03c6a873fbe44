"""Each team's share beside its weight: Kueue's weighted dominant resource share (kueue v0.19.2
pkg/cache/scheduler/fair_sharing.go, over the whole cohort tree, with department Cohorts' own shares) and Volcano
proportion's deal by weight (volcano v1.15.1 pkg/scheduler/plugins/proportion/proportion.go), computed from what the
clusters report."""

import re
from decimal import Decimal
from fractions import Fraction

import pytest
from django.urls import reverse

from portal.naming import TEAM_LABEL
from quotas.desired import cluster_scheduler_objects, team_namespace_quota_objects
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


def _team(cluster, flavor, *, slug, guaranteed, used, weight=1, parent=None):
    team = TeamFactory(slug=slug, name=slug.title(), fair_share_weight=weight, parent=parent)
    Quota.objects.create(team=team, flavor=flavor, guaranteed=guaranteed, burst=16)
    TeamNamespace.objects.update_or_create(team=team, cluster=cluster, defaults={
        "quota_status": {"flavors": {flavor.name: {"nvidia.com/gpu": used}}}})
    return team


def _departments(cluster, flavor, teams, weights=None):
    """teams: (slug, department slug, weight, guaranteed, used); each department made once, with its weight."""
    departments = {}
    for slug, department, weight, guaranteed, used in teams:
        if department not in departments:
            departments[department] = TeamFactory(slug=department, name=department.title(),
                                                  fair_share_weight=(weights or {}).get(department, 1))
        _team(cluster, flavor, slug=slug, guaranteed=guaranteed, used=used, weight=weight,
              parent=departments[department])


@pytest.fixture
def departments(db):
    """Two departments of two teams each under the cluster's cohort, every team above its guarantee."""
    cluster = ClusterFactory(name="west", cohort="gpu-west")
    flavor = GpuFlavor.objects.create(cluster=cluster, name="h100", capacity=40)
    _departments(cluster, flavor, [("vision", "research", 1, 8, 12), ("speech", "research", 1, 4, 6),
                                   ("search", "product", 2, 6, 9), ("ads", "product", 1, 6, 7)],
                 weights={"research": 2})
    return cluster


def test_department_cohorts_have_their_own_share_against_the_whole_tree(departments):
    rows = fair_shares(cluster=departments)
    # The root gpu-west could lend 8 + 4 + 6 + 6 = 24 H100s (every ClusterQueue's nominal quota, no lending limits).
    #   vision  12 - 8 = 4 borrowed: 4 × 1000 / 24 = 166.7, weight 1 → 167
    #   speech   6 - 4 = 2:          2 × 1000 / 24 =  83.3, weight 1 →  84
    #   search   9 - 6 = 3:          3 × 1000 / 24 = 125,   weight 2 →  62.5 → 63
    #   ads      7 - 6 = 1:          1 × 1000 / 24 =  41.7, weight 1 →  42
    #   research Cohort (12 + 6) - (8 + 4) = 6: 6 × 1000 / 24 = 250, weight 2 → 125
    #   product  Cohort (9 + 7) - (6 + 6) = 4:  4 × 1000 / 24 = 166.7, weight 1 → 167
    # So at the root research (125) is served before product (167), though vision's own share is as high.
    assert [(r.team.slug, r.department, r.cohort, r.share) for r in rows] == [
        ("product", True, "gpu-west", 167), ("ads", False, "product", 42), ("search", False, "product", 63),
        ("research", True, "gpu-west", 125), ("speech", False, "research", 84), ("vision", False, "research", 167),
    ]
    research = next(r for r in rows if r.department and r.team.slug == "research")
    assert (research.weight, research.guaranteed, research.in_use, research.borrowed) == (2, 12, 18, 6)


def test_a_team_in_a_department_borrows_from_the_whole_tree_not_only_its_department(db):
    cluster = ClusterFactory(name="north", cohort="gpu-north")
    flavor = GpuFlavor.objects.create(cluster=cluster, name="h100", capacity=16)
    _departments(cluster, flavor, [("vision", "research", 1, 8, 12)], weights={"research": 2})
    _team(cluster, flavor, slug="ops", guaranteed=8, used=0)
    rows = fair_shares(cluster=cluster)
    # vision borrows 4 of the 8 + 8 = 16 the root could lend: 4 × 1000 / 16 = 250. Counting only its department's
    # 8, as a flat reckoning did, would make it 500.
    assert next(r.share for r in rows if r.team.slug == "vision") == 250
    # The research Cohort (weight 2) borrows the same 4: 250 / 2 = 125; ops is within nominal.
    assert {(r.team.slug, r.department): r.share for r in rows} == {
        ("ops", False): 0, ("research", True): 125, ("vision", False): 250}


def test_a_department_cohort_with_no_parent_is_a_root_without_a_share(db):
    cluster = ClusterFactory(name="south", cohort="")
    flavor = GpuFlavor.objects.create(cluster=cluster, name="h100", capacity=16)
    _departments(cluster, flavor, [("vision", "research", 1, 8, 12), ("speech", "research", 1, 8, 4)])
    _team(cluster, flavor, slug="ops", guaranteed=8, used=10)
    shares = {(r.team.slug, r.department): r.share for r in fair_shares(cluster=cluster)}
    # research is its own root, lending 8 + 8 = 16: vision borrows 4 → 250. ops is in no cohort.
    assert shares == {("ops", False): None, ("research", True): None, ("speech", False): 0, ("vision", False): 250}


def test_shares_agree_with_the_sandbox_port_of_kueue_on_the_desired_objects(departments):
    """The same numbers from Kueue's quota tree built from the ClusterQueues and Cohorts the portal applies
    (borrowing limits and CPU quota included), with the reported usage added."""
    from sandbox.simulator import kueue_fair_sharing as fair
    from sandbox.simulator import quota_tree

    objects = cluster_scheduler_objects(departments, tiers=[])
    for namespace in departments.team_namespaces.select_related("team", "cluster"):
        objects += team_namespace_quota_objects(namespace)

    def quotas(spec):
        return {(flavor["name"], resource["name"]): quota_tree.quota_from(resource)
                for group in spec.get("resourceGroups") or [] for flavor in group["flavors"]
                for resource in flavor["resources"]}

    queues = {o["metadata"]["labels"][TEAM_LABEL]: o["spec"] for o in objects if o["kind"] == "ClusterQueue"}
    cohorts = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Cohort"}
    nodes = quota_tree.build(
        {slug: {"cohort": spec["cohortName"], "quotas": quotas(spec)} for slug, spec in queues.items()},
        {name: {"parent": spec.get("parentName", ""), "quotas": quotas(spec)} for name, spec in cohorts.items()})
    for namespace in departments.team_namespaces.all():
        for flavor, used in namespace.quota_status["flavors"].items():
            gpus = Decimal(used["nvidia.com/gpu"])
            quota_tree.add_usage(nodes[namespace.team.slug], (flavor, "nvidia.com/gpu"), gpus)
    expected = {(slug, False): fair.rounded(nodes[slug], fair.weight(spec)) for slug, spec in queues.items()}
    for name, spec in cohorts.items():
        cohort = next(node.parent for node in nodes.values() if node.parent.name == name)
        expected[(name, True)] = fair.rounded(cohort, fair.weight(spec))
    assert {(r.team.slug, r.department): r.share for r in fair_shares(cluster=departments)} == expected


def test_console_shows_department_cohorts_above_their_teams_with_their_weight(client, departments):
    client.force_login(PlatformAdminFactory())
    page = client.get(reverse("quotas:capacity")).content.decode()
    assert page.index('data-cohort="research"') < page.index('data-team="speech"') < page.index('data-team="vision"')
    cohort_row = page[page.index('data-cohort="research"'):].split("</tr>")[0]
    assert '<td class="num share">125</td>' in cohort_row and 'value="2"' in cohort_row
    assert client.post(reverse("quotas:team-weight", args=["research"]), {"weight": "5"}).status_code == 302
    assert Team.objects.get(slug="research").fair_share_weight == 5


def test_the_capacity_page_costs_the_same_with_more_departments(client, departments, django_assert_max_num_queries):
    client.force_login(PlatformAdminFactory())
    with django_assert_max_num_queries(12) as small:
        assert client.get(reverse("quotas:capacity")).status_code == 200
    _departments(departments, departments.flavors.get(), [
        (f"team-{n}", f"dept-{n % 3}", 1, 2, 3) for n in range(9)])
    with django_assert_max_num_queries(12) as large:
        assert client.get(reverse("quotas:capacity")).status_code == 200
    assert len(large.captured_queries) == len(small.captured_queries)


def test_a_department_row_keeps_its_flavors_apart(client, db):
    """A department whose teams hold different flavors shows units per flavor, never an H100 plus a MIG slice as
    one number, and borrows flavor by flavor: one flavor's spare guarantee does not offset another's borrowing."""
    cluster = ClusterFactory(name="mixed", cohort="gpu-mixed")
    h100 = GpuFlavor.objects.create(cluster=cluster, name="h100", capacity=40)
    mig = GpuFlavor.objects.create(cluster=cluster, name="h100-1g", capacity=56, sharing="mig",
                                   resource_name="nvidia.com/mig-1g.10gb")
    research = TeamFactory(slug="research", name="Research")
    _team(cluster, h100, slug="vision", guaranteed=8, used=12, parent=research)
    speech = _team(cluster, mig, slug="speech", guaranteed=14, used=0, parent=research)
    TeamNamespace.objects.filter(team=speech).update(
        quota_status={"flavors": {"h100-1g": {"nvidia.com/mig-1g.10gb": 3}}})
    rows = {r.team.slug: r for r in fair_shares(cluster=cluster)}
    department = rows["research"]
    assert department.department and department.flavors == {"h100": (8, 12), "h100-1g": (14, 3)}
    assert department.borrowed_by_flavor == {"h100": 4, "h100-1g": 0} and department.borrowed == 4
    client.force_login(PlatformAdminFactory())
    page = client.get(reverse("quotas:capacity")).content.decode()
    row = re.sub(r"<[^>]+>", " ", page[page.index('data-cohort="research"'):].split("</tr>")[0])
    assert re.sub(r"\s+", " ", row).split(" department Cohort ")[1].startswith(
        "gpu-mixed h100 8 h100-1g 14 h100 12 h100-1g 3 h100 4 h100-1g 0 "), row
    assert "22" not in row and " 15 " not in row  # 8 + 14 and 12 + 3 are no quantity of anything
