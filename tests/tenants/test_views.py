"""Pages of the tenancy app: permissions (shared battery), content, form errors, audit and query budgets."""

import html
from datetime import timedelta

import pytest
import yaml
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from sandbox import Sandbox
from tenants.choices import Role, TeamState
from tenants.models import AuditEvent, Cluster, Membership, Team, TeamNamespace
from tenants.topology import volcano_discovery_config
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UserFactory,
)
from tests.permissions import PagePermissionCases, assert_page_permissions, request_as

pytestmark = pytest.mark.django_db
QUERY_BUDGET = 15
IP = "203.0.113.7"


@pytest.fixture
def cluster():
    cluster = ClusterFactory(name="east")
    GpuFlavorFactory(cluster=cluster, name="h100", gpu_model="NVIDIA H100", capacity=32)
    return cluster


@pytest.fixture
def team(cluster):
    team = TeamFactory(slug="nlp", name="Natural Language", cost_center="CC-42", idp_group="oidc-nlp")
    TeamNamespaceFactory(team=team, cluster=cluster)
    return team


@pytest.fixture
def team_admin(team):
    return MembershipFactory(team=team, user=UserFactory(username="ada"), role=Role.ADMIN).user


@pytest.fixture
def member(team):
    return MembershipFactory(team=team, user=UserFactory(username="erin"), role=Role.MEMBER).user


@pytest.fixture
def viewer(team):
    return MembershipFactory(team=team, user=UserFactory(username="vic"), role=Role.VIEWER).user


@pytest.fixture
def outsider(cluster):
    other = TeamFactory(slug="vision", name="Vision")
    TeamNamespaceFactory(team=other, cluster=cluster)
    return MembershipFactory(team=other, user=UserFactory(username="otto"), role=Role.ADMIN).user


@pytest.fixture
def staff():
    return PlatformAdminFactory(username="root")


def login(client, user):
    client.force_login(user)
    return client


def text(response) -> str:
    return response.content.decode()


def count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def make_teams(n: int, *, cluster, user=None, members_per_team: int = 1) -> list[Team]:
    teams = []
    for i in range(n):
        team = TeamFactory(slug=f"bulk-{n}-{i}")
        TeamNamespaceFactory(team=team, cluster=cluster)
        if user is not None:
            MembershipFactory(team=team, user=user, role=Role.MEMBER)
        for _ in range(members_per_team):
            MembershipFactory(team=team)
        teams.append(team)
    return teams


# --- login and base ------------------------------------------------------------------------------------------


def test_login_page_renders_and_logs_in(client, member):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert 'name="username"' in text(response) and 'name="password"' in text(response)
    response = client.post(reverse("login"), {"username": "erin", "password": "pw-for-tests-only"})
    assert response.status_code == 302 and response["Location"] == reverse("tenants:dashboard")


def test_base_has_nav_htmx_stylesheet_and_logout_form(client, member, staff):
    page = text(login(client, member).get(reverse("tenants:dashboard")))
    assert "css/portal.css" in page and "htmx" in page
    assert f'action="{reverse("logout")}"' in page and 'method="post"' in page
    assert reverse("tenants:cluster-list") not in page  # console links are for platform admins only
    page = text(login(client, staff).get(reverse("tenants:dashboard")))
    assert reverse("tenants:cluster-list") in page and reverse("tenants:audit-list") in page


# --- dashboard -----------------------------------------------------------------------------------------------


def test_dashboard_permissions(client, member, staff):
    assert_page_permissions(client, reverse("tenants:dashboard"), allowed=[member, staff])


def test_dashboard_shows_only_my_teams(client, member, outsider):
    page = text(login(client, member).get(reverse("tenants:dashboard")))
    assert "Natural Language" in page and "Vision" not in page


def test_dashboard_platform_admin_sees_all_teams(client, team, outsider, staff):
    page = text(login(client, staff).get(reverse("tenants:dashboard")))
    assert "Natural Language" in page and "Vision" in page


def test_dashboard_sync_states(client, member, team, cluster):
    row = TeamNamespace.objects.get(team=team, cluster=cluster)
    TeamNamespace.objects.filter(pk=row.pk).update(
        attempts=3, next_attempt_at=timezone.now() + timedelta(seconds=40.9),
        conditions=[{"type": "Ready", "status": "False", "reason": "Retrying",
                     "message": "503 ServiceUnavailable: etcd is busy"}])
    west = ClusterFactory(name="west")
    TeamNamespaceFactory(team=team, cluster=west, generation=2, observed_generation=1, conditions=[
        {"type": "Ready", "status": "False", "reason": "Rejected", "message": "422 Invalid: spec.quota"}])
    north = ClusterFactory(name="north")
    TeamNamespaceFactory(team=team, cluster=north, generation=1, observed_generation=1, conditions=[
        {"type": "Ready", "status": "True", "reason": "Applied", "message": "7 objects applied"}])
    south = ClusterFactory(name="south")
    TeamNamespaceFactory(team=team, cluster=south)

    page = text(login(client, member).get(reverse("tenants:dashboard")))
    assert "retrying</span> (attempt 3, next in 40 s): 503 ServiceUnavailable: etcd is busy" in page
    assert "rejected</span> by API server: 422 Invalid: spec.quota" in page
    assert 'badge-applied">applied' in page and "7 objects applied" in page
    assert 'badge-pending">pending' in page


def test_dashboard_query_count_does_not_grow_with_teams(client, staff, cluster):
    login(client, staff)
    make_teams(10, cluster=cluster)
    small = count_queries(client, reverse("tenants:dashboard"))
    make_teams(90, cluster=cluster)
    large = count_queries(client, reverse("tenants:dashboard"))
    assert small == large <= QUERY_BUDGET


def test_dashboard_query_budget_for_a_member(client, cluster, django_assert_max_num_queries):
    user = UserFactory()
    make_teams(20, cluster=cluster, user=user)
    login(client, user)
    with django_assert_max_num_queries(QUERY_BUDGET):
        assert client.get(reverse("tenants:dashboard")).status_code == 200


# --- team page -----------------------------------------------------------------------------------------------


class TestTeamPagePermissions(PagePermissionCases):
    @pytest.fixture
    def page_url(self, team):
        return reverse("tenants:team-detail", args=[team.slug])

    @pytest.fixture
    def page_users(self, viewer, member, team_admin, staff, outsider):
        return {"allowed": [viewer, member, team_admin, staff], "others_team_user": outsider}


def test_team_page_shows_team_members_and_pending_desired_objects(client, team, team_admin, member, viewer):
    page = text(login(client, viewer).get(reverse("tenants:team-detail", args=[team.slug])))
    for expected in ("Natural Language", "<code>nlp</code>", "CC-42", "oidc-nlp", "ada", "erin", "vic",
                     "Team admin", "Member", "Viewer", "Namespace", "ResourceQuota", "LimitRange", "RoleBinding"):
        assert expected in page, expected
    assert 'badge-pending">pending' in page and 'hx-trigger="every 10s"' in page  # refreshes while pending
    assert reverse("tenants:object-detail", args=["nlp", "east", "core", "v1", "Namespace", "nlp"]) in page
    assert reverse("tenants:object-detail", args=[
        "nlp", "east", "rbac.authorization.k8s.io", "v1", "RoleBinding", "gpu-portal-edit"]) in page
    # a viewer neither manages members nor retries
    assert "Add a member" not in page and "Change role" not in page and "Retry now" not in page


def test_team_page_shows_objects_status_and_ready_message(client, team, cluster, member):
    TeamNamespace.objects.filter(team=team).update(
        generation=2, observed_generation=1, attempts=1,
        conditions=[{"type": "Ready", "status": "False", "reason": "Rejected",
                     "message": "422 Invalid: LimitRange max"}],
        objects_status=[
            {"apiVersion": "v1", "kind": "Namespace", "namespace": "", "name": "nlp", "state": "applied",
             "message": ""},
            {"apiVersion": "v1", "kind": "LimitRange", "namespace": "nlp", "name": "gpu-portal-limits",
             "state": "failed", "message": "422 Invalid: LimitRange max"},
            {"apiVersion": "v1", "kind": "ResourceQuota", "namespace": "nlp", "name": "gpu-portal-quota",
             "state": "waiting", "message": ""},
        ])
    page = text(login(client, member).get(reverse("tenants:team-detail", args=[team.slug])))
    assert "rejected</span> by API server: 422 Invalid: LimitRange max" in page
    assert 'hx-trigger="every 10s"' not in page  # a rejected row waits for a change: no polling
    assert 'badge-applied">applied' in page and 'badge-failed">failed' in page and 'badge-waiting">waiting' in page
    assert reverse("tenants:object-detail", args=["nlp", "east", "core", "v1", "LimitRange",
                                                  "gpu-portal-limits"]) in page


def test_team_admin_sees_member_forms_and_platform_admin_sees_retry(client, team, team_admin, staff):
    page = text(login(client, team_admin).get(reverse("tenants:team-detail", args=[team.slug])))
    assert "Add a member" in page and "Change role" in page and "Remove" in page and "Retry now" not in page
    page = text(login(client, staff).get(reverse("tenants:team-detail", args=[team.slug])))
    assert "Retry now" in page and "Add a member" in page


def test_archived_team_has_no_member_forms(client, team, team_admin):
    Team.objects.filter(pk=team.pk).update(state=TeamState.ARCHIVED)
    page = text(login(client, team_admin).get(reverse("tenants:team-detail", args=[team.slug])))
    assert "Add a member" not in page


def test_team_page_query_count_is_constant(client, cluster):
    user = UserFactory()
    make_teams(10, cluster=cluster, user=user, members_per_team=10)
    target = Team.objects.get(slug="bulk-10-0")
    Membership.objects.filter(team=target, user=user).update(role=Role.ADMIN)
    login(client, user)
    url = reverse("tenants:team-detail", args=[target.slug])
    small = count_queries(client, url)
    make_teams(100, cluster=cluster, user=user)
    for _ in range(90):
        MembershipFactory(team=target)
    large = count_queries(client, url)
    assert small == large <= QUERY_BUDGET


def test_team_page_query_budget_for_platform_admin(client, team, staff, django_assert_max_num_queries):
    for _ in range(30):
        MembershipFactory(team=team)
    login(client, staff)
    with django_assert_max_num_queries(QUERY_BUDGET):
        assert client.get(reverse("tenants:team-detail", args=[team.slug])).status_code == 200


# --- members -------------------------------------------------------------------------------------------------


def test_member_add_permissions(client, team, team_admin, member, viewer, outsider):
    newcomer = UserFactory(username="nina")
    assert_page_permissions(
        client, reverse("tenants:membership-add", args=[team.slug]), method="post",
        data={"username": newcomer.username, "role": Role.MEMBER},
        allowed=[team_admin], forbidden=[viewer, member], others_team_user=outsider)
    assert Membership.objects.get(team=team, user=newcomer).role == Role.MEMBER


def test_member_add_is_audited(client, team, team_admin):
    UserFactory(username="nina")
    response = login(client, team_admin).post(reverse("tenants:membership-add", args=[team.slug]),
                                              {"username": "nina", "role": Role.VIEWER}, REMOTE_ADDR=IP)
    assert response.status_code == 302 and response["Location"] == reverse("tenants:team-detail", args=["nlp"])
    event = AuditEvent.objects.get(action="membership.set")
    assert (event.actor, event.team, event.source_ip) == (team_admin, team, IP)
    assert event.after == {"user": "nina", "role": Role.VIEWER}
    page = text(client.get(response["Location"]))
    assert "nina is now viewer" in page


def test_member_add_unknown_username_shows_error(client, team, team_admin):
    before = Membership.objects.count()
    response = login(client, team_admin).post(reverse("tenants:membership-add", args=[team.slug]),
                                              {"username": "ghost", "role": Role.MEMBER})
    assert response.status_code == 200
    assert "There is no active user named “ghost”." in text(response)
    assert Membership.objects.count() == before and not AuditEvent.objects.exists()


def test_member_add_bad_role_shows_error(client, team, team_admin):
    UserFactory(username="nina")
    response = login(client, team_admin).post(reverse("tenants:membership-add", args=[team.slug]),
                                              {"username": "nina", "role": "owner"})
    assert response.status_code == 200 and "Select a valid choice" in text(response)
    assert not Membership.objects.filter(user__username="nina").exists()


def test_member_role_change_is_audited(client, team, team_admin, member):
    response = login(client, team_admin).post(reverse("tenants:membership-update", args=[team.slug]),
                                              {"username": "erin", "role": Role.VIEWER}, REMOTE_ADDR=IP)
    assert response.status_code == 302
    assert Membership.objects.get(team=team, user=member).role == Role.VIEWER
    event = AuditEvent.objects.get(action="membership.set")
    assert event.before == {"role": Role.MEMBER} and event.source_ip == IP
    assert "erin is now viewer of Natural Language." in text(client.get(response["Location"]))


def test_demoting_the_last_admin_shows_error(client, team, team_admin):
    response = login(client, team_admin).post(reverse("tenants:membership-update", args=[team.slug]),
                                              {"username": "ada", "role": Role.MEMBER})
    assert response.status_code == 200 and "A team keeps at least one admin." in text(response)
    assert Membership.objects.get(team=team, user=team_admin).role == Role.ADMIN
    assert not AuditEvent.objects.exists()


def test_member_remove_is_audited(client, team, team_admin, member, viewer):
    url = reverse("tenants:membership-remove", args=[team.slug])
    assert_page_permissions(client, url, method="post", data={"username": "erin", "confirmed": "1"},
                            forbidden=[viewer, member])
    # Without the dialog's confirmed=1 (no JavaScript): a page says what will happen and posts it back with Yes.
    asked = login(client, team_admin).post(url, {"username": "erin"}, REMOTE_ADDR=IP)
    page = html.unescape(text(asked))
    assert asked.status_code == 200 and "Remove erin from Natural Language?" in page
    assert "erin can no longer see the team's jobs" in page and "Yes, remove erin" in page
    assert 'name="username" value="erin"' in asked.content.decode() and 'name="confirmed" value="1"' in page
    assert Membership.objects.filter(team=team, user=member).exists() and not AuditEvent.objects.exists()
    response = client.post(url, {"username": "erin", "confirmed": "1"}, REMOTE_ADDR=IP)
    assert response.status_code == 302
    assert not Membership.objects.filter(team=team, user=member).exists()
    event = AuditEvent.objects.get(action="membership.remove")
    assert event.before == {"user": "erin", "role": Role.MEMBER} and event.actor == team_admin
    assert "erin was removed from Natural Language." in text(client.get(response["Location"]))


def test_removing_the_last_admin_shows_error(client, team, team_admin):
    response = login(client, team_admin).post(reverse("tenants:membership-remove", args=[team.slug]),
                                              {"username": "ada"})
    assert response.status_code == 200 and "A team keeps at least one admin." in text(response)
    assert Membership.objects.filter(team=team, user=team_admin).exists()
    assert not AuditEvent.objects.exists()


def test_removing_a_non_member_shows_error(client, team, team_admin, outsider):
    response = login(client, team_admin).post(reverse("tenants:membership-remove", args=[team.slug]),
                                              {"username": "otto"})
    assert response.status_code == 200 and "otto is not a member of Natural Language." in text(response)


def test_member_forms_reject_get_and_archived_teams(client, team, team_admin):
    login(client, team_admin)
    assert client.get(reverse("tenants:membership-add", args=[team.slug])).status_code == 405
    Team.objects.filter(pk=team.pk).update(state=TeamState.ARCHIVED)
    UserFactory(username="nina")
    response = client.post(reverse("tenants:membership-add", args=[team.slug]), {"username": "nina", "role": "member"})
    assert response.status_code == 403


# --- retry ---------------------------------------------------------------------------------------------------


def test_namespace_retry_is_for_platform_admins(client, team, cluster, team_admin, staff, outsider):
    row = TeamNamespace.objects.get(team=team, cluster=cluster)
    url = reverse("tenants:namespace-retry", args=[team.slug, cluster.name])
    assert_page_permissions(client, url, method="post", allowed=[staff], forbidden=[team_admin, outsider])
    row.refresh_from_db()
    assert row.generation == 2
    assert AuditEvent.objects.get(action="reconcile.retry").team == team
    response = request_as(client, staff, reverse("tenants:namespace-retry", args=[team.slug, "nowhere"]),
                          method="post")
    assert response.status_code == 404


# --- object YAML ---------------------------------------------------------------------------------------------


def object_url(name="object-detail", kind="Namespace", obj="nlp", group="core", version="v1", team="nlp",
               cluster="east"):
    return reverse(f"tenants:{name}", args=[team, cluster, group, version, kind, obj])


def test_object_page_permissions_and_desired_yaml(client, team, member, viewer, outsider):
    url = object_url()
    responses = assert_page_permissions(client, url, allowed=[viewer, member], others_team_user=outsider)
    page = text(responses[0])
    assert "apiVersion: v1" in page and "kind: Namespace" in page and "name: nlp" in page
    assert f'hx-get="{object_url("object-live")}"' in page and f'href="{object_url("object-live")}"' in page


def test_object_page_for_a_grouped_kind(client, team, member):
    url = object_url(kind="RoleBinding", obj="gpu-portal-edit", group="rbac.authorization.k8s.io")
    page = text(login(client, member).get(url))
    assert "kind: RoleBinding" in page and "name: edit" in page


@pytest.mark.parametrize("kwargs", [
    {"obj": "other"}, {"kind": "Secret"}, {"group": "apps"}, {"version": "v2"}, {"cluster": "nowhere"},
    {"team": "no-such-team"},
])
def test_object_page_404_for_objects_the_team_does_not_own(client, team, member, kwargs):
    login(client, member)
    assert client.get(object_url(**kwargs)).status_code == 404
    assert client.get(object_url("object-live", **kwargs)).status_code == 404


def test_live_object_shows_the_error_when_the_cluster_is_unreachable(client, team, member, outsider):
    url = object_url("object-live")
    responses = assert_page_permissions(client, url, allowed=[member], others_team_user=outsider)
    page = text(responses[0])
    assert "The cluster could not be read" in page and "Connection refused" in page
    assert "<html" in page  # without JavaScript it is a whole page
    partial = text(login(client, member).get(url, HTTP_HX_REQUEST="true"))
    assert "The cluster could not be read" in partial and "<html" not in partial


def test_live_object_yaml_and_absent(client, team, member, monkeypatch):
    from tenants import selectors

    live = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "nlp", "managedFields": [{"manager": "gpu-portal"}], "uid": "abc"}}
    monkeypatch.setattr(selectors, "live_object", lambda **kwargs: live)
    page = text(login(client, member).get(object_url("object-live"), HTTP_HX_REQUEST="true"))
    assert "uid: abc" in page and "managedFields" not in page
    monkeypatch.setattr(selectors, "live_object", lambda **kwargs: None)
    page = text(client.get(object_url("object-live"), HTTP_HX_REQUEST="true"))
    assert "Not present in the cluster." in page


# --- console: clusters ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,args", [
    ("tenants:cluster-list", []), ("tenants:cluster-detail", ["east"]), ("tenants:team-list", []),
    ("tenants:audit-list", []),
])
def test_console_pages_are_for_platform_admins(client, cluster, team_admin, member, staff, name, args):
    assert_page_permissions(client, reverse(name, args=args), allowed=[staff], forbidden=[team_admin, member])


def test_non_staff_get_the_403_page(client, member):
    response = login(client, member).get(reverse("tenants:cluster-list"))
    assert response.status_code == 403 and "Platform admins only." in text(response)


def test_other_teams_page_is_a_404_page(client, team, outsider):
    response = login(client, outsider).get(reverse("tenants:team-detail", args=[team.slug]))
    assert response.status_code == 404 and "Natural Language" not in text(response)


def test_cluster_list_shows_flavors_capacity_and_sync(client, cluster, staff):
    GpuFlavorFactory(cluster=cluster, name="a100", capacity=16)
    ClusterFactory(name="west", scheduler="volcano")
    page = text(login(client, staff).get(reverse("tenants:cluster-list")))
    assert "east" in page and "west" in page and "Volcano" in page and "Sandbox cluster" in page
    assert '<td class="num">2</td>' in page and '>48</td>' in page  # whole GPUs: 32 + 16
    assert 'badge-pending">pending' in page


def test_cluster_detail_shows_flavors_and_desired_objects(client, cluster, staff):
    PriorityTierFactory(name="standard", value=1000)
    page = text(login(client, staff).get(reverse("tenants:cluster-detail", args=["east"])))
    for expected in ("h100", "nvidia.com/gpu", "NVIDIA H100", "32", "80 GB", "Exclusive (whole GPU)",
                     "gpu-portal.io/flavor=h100", "ResourceFlavor", "PriorityClass", "Retry now"):
        assert expected in page, expected
    detail = reverse("tenants:cluster-object-detail", args=["east", "kueue.x-k8s.io", "v1beta2", "ResourceFlavor",
                                                            "h100"])
    assert detail in page
    page = text(client.get(detail))
    assert "kind: ResourceFlavor" in page
    live = text(client.get(reverse("tenants:cluster-object-live", args=["east", "kueue.x-k8s.io", "v1beta2",
                                                                         "ResourceFlavor", "h100"])))
    assert "The cluster could not be read" in live


def test_a_volcano_clusters_page_shows_the_discovery_config_and_what_volcano_built(client, staff):
    """The label discovery configuration for the cluster's levels (volcano v1.15.1 pkg/controllers/hypernode), and,
    read live, the HyperNodes Volcano's discoverer built from it (the sandbox plays the discoverer)."""
    levels = [{"name": "rack", "node_label": "example.com/rack"},
              {"name": "host", "node_label": "kubernetes.io/hostname"}]
    with Sandbox(simulate=True, tick=None) as sb:
        ClusterFactory(name="west", scheduler="volcano", server=sb.url, topology_levels=levels)
        page = text(login(client, staff).get(reverse("tenants:cluster-detail", args=["west"])))
        config = yaml.safe_load(volcano_discovery_config(levels))
        assert config["networkTopologyDiscovery"][0]["config"]["networkTopologyTypes"] == {"gpu-portal": [
            {"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}
        assert "volcano-controller-configmap" in page and "nodeLabel: example.com/rack" in page
        fragment_url = reverse("tenants:cluster-hypernodes", args=["west"])
        assert fragment_url in page
        assert "Volcano has built no HyperNodes on west" in text(client.get(fragment_url))
        for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2")):
            sb.add_node(name, gpus=8, labels={"example.com/rack": rack, "kubernetes.io/hostname": name})
        rt = sb.store.kind("v1", "Namespace")
        sb.store.create(rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}})
        sb.store.create(sb.store.kind("v1", "ConfigMap"), {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
            "data": {"volcano-controller.conf": volcano_discovery_config(levels)}})
        sb.simulator.step()
        fragment = text(client.get(fragment_url))
        assert fragment.count("<tr>") == 3 and "rack" in fragment and "<code>r1</code>" in fragment
        assert '<td class="num">2</td>' in fragment  # rack r1's two nodes
        assert "do not match" not in fragment
        cluster = Cluster.objects.get(name="west")
        cluster.topology_levels = [{"name": "block", "node_label": "example.com/block"}, *levels]
        cluster.save()
        fragment = text(client.get(fragment_url))  # the levels changed, the ConfigMap not yet
        assert "do not match this cluster's levels: none for block. Apply the configuration above." in fragment
    assert "could not be read" in text(client.get(fragment_url))  # the cluster is gone


def test_cluster_detail_404(client, staff):
    assert login(client, staff).get(reverse("tenants:cluster-detail", args=["nowhere"])).status_code == 404


def test_cluster_retry(client, cluster, staff, team_admin):
    url = reverse("tenants:cluster-retry", args=["east"])
    assert_page_permissions(client, url, method="post", allowed=[staff], forbidden=[team_admin])
    cluster.refresh_from_db()
    assert cluster.generation == 2 and AuditEvent.objects.filter(action="reconcile.retry").count() == 1


# --- console: teams ------------------------------------------------------------------------------------------


def test_team_create(client, cluster, staff, team):
    response = login(client, staff).post(reverse("tenants:team-list"), {
        "slug": "speech", "name": "Speech", "cost_center": "CC-7", "idp_group": "oidc-speech",
        "parent": team.pk}, REMOTE_ADDR=IP)
    assert response.status_code == 302
    created = Team.objects.get(slug="speech")
    assert (created.parent, created.cost_center) == (team, "CC-7")
    assert created.namespaces.filter(cluster=cluster).exists()
    assert AuditEvent.objects.get(action="team.create").source_ip == IP


@pytest.mark.parametrize("slug,message", [
    ("kube-system", "is reserved for the cluster itself"),
    ("default", "is reserved for the cluster itself"),
    ("Bad_Slug", "Use lowercase letters, digits and"),
    ("a" * 70, "at most 63 characters"),
    ("nlp", "Team with this Slug already exists."),
    ("", "This field is required."),
])
def test_team_create_slug_errors_show_on_the_field(client, team, staff, slug, message):
    before = Team.objects.count()
    response = login(client, staff).post(reverse("tenants:team-list"), {"slug": slug, "name": "X"})
    assert response.status_code == 200
    slug_errors = " ".join(response.context["create_form"].errors.get("slug", []))
    assert message.lower() in slug_errors.lower()
    assert Team.objects.count() == before and not AuditEvent.objects.exists()


def test_team_create_reserved_idp_group_error(client, staff):
    response = login(client, staff).post(reverse("tenants:team-list"),
                                         {"slug": "ok", "name": "Ok", "idp_group": "system:masters"})
    assert response.status_code == 200 and "reserved" in text(response)
    assert not Team.objects.filter(slug="ok").exists()


def test_team_state_actions(client, team, staff, team_admin):
    url = reverse("tenants:team-set-state", args=[team.slug])
    assert_page_permissions(client, url, method="post", data={"state": "suspended", "confirmed": "1"},
                            allowed=[staff], forbidden=[team_admin])
    team.refresh_from_db()
    assert team.state == TeamState.SUSPENDED
    login(client, staff)
    client.post(url, {"state": "active"})  # reactivating takes nothing away: no confirmation
    asked = client.post(url, {"state": "archived"})
    page = html.unescape(text(asked))
    assert asked.status_code == 200 and "Archive Natural Language?" in page and "Yes, archive it" in page
    assert "Members lose access, the team's quota no longer counts" in page
    team.refresh_from_db()
    assert team.state == TeamState.ACTIVE
    client.post(url, {"state": "archived", "confirmed": "1"})
    team.refresh_from_db()
    assert team.state == TeamState.ARCHIVED
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "team.suspended", "team.active", "team.archived"]


def test_team_state_bad_input_is_a_message_not_a_500(client, team, staff):
    login(client, staff)
    url = reverse("tenants:team-set-state", args=[team.slug])
    Team.objects.filter(pk=team.pk).update(state=TeamState.ARCHIVED)
    response = client.post(url, {"state": "suspended"}, follow=True)
    assert response.status_code == 200 and "cannot become suspended" in text(response)
    response = client.post(url, {"state": "exploded"}, follow=True)
    assert response.status_code == 200 and "choose active, suspended or archived" in text(response)
    team.refresh_from_db()
    assert team.state == TeamState.ARCHIVED and not AuditEvent.objects.exists()


def test_delete_namespaces_needs_the_slug_typed_back(client, team, staff):
    Team.objects.filter(pk=team.pk).update(state=TeamState.ARCHIVED)
    login(client, staff)
    page = text(client.get(reverse("tenants:team-list")))
    assert "Delete namespaces" in page
    url = reverse("tenants:team-delete-namespaces", args=[team.slug])
    response = client.post(url, {"confirmation": "nope"})
    assert response.status_code == 200 and "Type the team&#x27;s slug (nlp) to confirm." in text(response)
    team.refresh_from_db()
    assert team.namespace_deletion_confirmed_at is None
    response = client.post(url, {"confirmation": "nlp"})
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.namespace_deletion_confirmed_at is not None
    assert AuditEvent.objects.filter(action="team.namespaces_delete").exists()


def test_delete_namespaces_of_an_active_team_is_refused(client, team, staff):
    response = login(client, staff).post(reverse("tenants:team-delete-namespaces", args=[team.slug]),
                                         {"confirmation": "nlp"})
    assert response.status_code == 200 and "Only an archived team" in text(response)
    team.refresh_from_db()
    assert team.namespace_deletion_confirmed_at is None


def test_console_team_list_query_budget(client, cluster, staff, django_assert_max_num_queries):
    make_teams(30, cluster=cluster)
    login(client, staff)
    with django_assert_max_num_queries(QUERY_BUDGET):
        assert client.get(reverse("tenants:team-list")).status_code == 200


# --- console: audit ------------------------------------------------------------------------------------------


def audit_events(n: int, *, team=None, action="team.update"):
    now = timezone.now()
    AuditEvent.objects.bulk_create([
        AuditEvent(at=now - timedelta(minutes=i), action=action, object_type="team", object_id=str(i),
                   object_repr=f"event-{i}", team=team) for i in range(n)])


def test_audit_log_is_newest_first_and_paginated(client, staff, django_assert_max_num_queries):
    audit_events(60)
    login(client, staff)
    with django_assert_max_num_queries(QUERY_BUDGET):
        response = client.get(reverse("tenants:audit-list"))
    page = response.context["page"]
    assert len(page.object_list) == 50 and page.paginator.num_pages == 2
    assert page.object_list[0].object_repr == "event-0"
    assert "Page 1 of 2" in text(response)
    second = client.get(reverse("tenants:audit-list"), {"page": 2}).context["page"]
    assert [e.object_repr for e in second.object_list] == [f"event-{i}" for i in range(50, 60)]
    assert client.get(reverse("tenants:audit-list"), {"page": "abc"}).status_code == 200


def test_audit_log_filters_by_action_and_team(client, team, outsider, staff):
    vision = Team.objects.get(slug="vision")
    audit_events(3, team=team, action="membership.set")
    audit_events(2, team=vision, action="membership.set")
    audit_events(4, team=team, action="team.update")
    login(client, staff)
    url = reverse("tenants:audit-list")
    assert len(client.get(url, {"action": "membership.set"}).context["page"].object_list) == 5
    assert len(client.get(url, {"team": "nlp"}).context["page"].object_list) == 7
    assert len(client.get(url, {"action": "membership.set", "team": "vision"}).context["page"].object_list) == 2
    response = client.get(url, {"action": "bogus", "team": "no-such"})
    assert response.status_code == 200


# --- Django admin --------------------------------------------------------------------------------------------


def test_every_tenancy_model_is_in_the_admin_and_audit_is_read_only(client, team, staff, cluster):
    from tenants import models

    for model in (models.Cluster, models.GpuFlavor, models.PriorityTier, models.Team, models.Membership,
                  models.TeamNamespace, models.AuditEvent):
        assert admin.site.is_registered(model), model
    audit_admin = admin.site._registry[AuditEvent]
    request = type("Request", (), {"user": staff})()
    assert not audit_admin.has_add_permission(request)
    assert not audit_admin.has_change_permission(request)
    assert not audit_admin.has_delete_permission(request)
    PriorityTierFactory()
    AuditEvent.objects.create(action="x", object_type="team", object_id="1", object_repr="x")
    login(client, staff)
    for model in ("cluster", "gpuflavor", "prioritytier", "team", "membership", "teamnamespace", "auditevent"):
        assert client.get(reverse(f"admin:tenants_{model}_changelist")).status_code == 200, model
    assert client.get(reverse("admin:tenants_team_change", args=[team.pk])).status_code == 200


def test_admin_team_action_goes_through_the_service(client, team, staff):
    login(client, staff)
    response = client.post(reverse("admin:tenants_team_changelist"),
                           {"action": "set_state_suspended", "_selected_action": [team.pk]})
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.state == TeamState.SUSPENDED and AuditEvent.objects.filter(action="team.suspended").exists()
