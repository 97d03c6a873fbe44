from datetime import timedelta

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from quotas import selectors, services
from quotas.choices import RequestState
from quotas.models import Quota, QuotaRequest
from tenants.choices import Role, TeamState
from tenants.models import AuditEvent, TeamNamespace
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


@pytest.fixture
def flavor():
    return GpuFlavorFactory(name="h100", capacity=16, cluster=ClusterFactory(name="east"))


@pytest.fixture
def team(flavor):
    team = TeamFactory(slug="nlp")
    TeamNamespaceFactory(team=team, cluster=flavor.cluster)
    return team


@pytest.fixture
def member(team):
    return MembershipFactory(team=team, role=Role.MEMBER, user__email="m@example.com").user


@pytest.fixture
def admin():
    return PlatformAdminFactory()


def ask(member, team, flavor, **overrides):
    fields = dict(guaranteed=8, burst=4, cpu_cores=64, memory_gib=512, justification="Pre-training the Q3 model")
    fields.update(overrides)
    return services.quota_request_create(actor=member, team=team, flavor=flavor, **fields)


def test_member_requests_and_admin_approves(member, team, flavor, admin, django_capture_on_commit_callbacks):
    request = ask(member, team, flavor)
    with django_capture_on_commit_callbacks(execute=True):
        quota = services.quota_request_approve(actor=admin, request=request, note="ok")
    assert (quota.guaranteed, quota.burst, quota.cpu_cores) == (8, 4, 64)
    request.refresh_from_db()
    assert request.state == RequestState.APPROVED and request.decided_by == admin
    assert AuditEvent.objects.filter(action="quota_request.approve", team=team).exists()
    assert mail.outbox and mail.outbox[0].to == ["m@example.com"] and "approved" in mail.outbox[0].subject
    row = TeamNamespace.objects.get(team=team)
    assert row.generation == 2  # the reconcile of the team's namespace in that cluster was requested


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"guaranteed": -1}, "guaranteed"),
        ({"burst": -3}, "burst"),
        ({"guaranteed": 200_000}, "guaranteed"),
        ({"guaranteed": 12, "burst": 8}, "exceeds the whole h100 capacity"),
        ({"justification": "x"}, "justification"),
        ({"ends_at": timezone.now() - timedelta(days=1)}, "future"),
    ],
)
def test_bad_requests_are_refused_and_nothing_is_saved(member, team, flavor, overrides, message):
    with pytest.raises(ValidationError, match=message):
        ask(member, team, flavor, **overrides)
    assert not QuotaRequest.objects.exists()


def test_viewers_cannot_request(team, flavor):
    viewer = MembershipFactory(team=team, role=Role.VIEWER).user
    with pytest.raises(PermissionDenied):
        ask(viewer, team, flavor)


def test_a_flavor_of_a_cluster_without_the_teams_namespace_is_refused(member, team):
    elsewhere = GpuFlavorFactory(cluster=ClusterFactory(name="west"))
    with pytest.raises(ValidationError, match="not offered"):
        ask(member, team, elsewhere)


def test_approval_cannot_exceed_capacity_times_overcommit(member, team, flavor, admin):
    QuotaFactory(flavor=flavor, guaranteed=10, burst=0)
    request = ask(member, team, flavor, guaranteed=8, burst=0)
    with pytest.raises(ValidationError, match="At most 6"):
        services.quota_request_approve(actor=admin, request=request)
    request.refresh_from_db()
    assert request.state == RequestState.PENDING and not Quota.objects.filter(team=team).exists()
    flavor.cluster.overcommit = 1.5
    flavor.cluster.save()
    services.quota_request_approve(actor=admin, request=request)
    assert Quota.objects.get(team=team).guaranteed == 8


def test_approve_with_adjusted_amounts_and_no_double_decision(member, team, flavor, admin):
    request = ask(member, team, flavor)
    services.quota_request_approve(actor=admin, request=request, guaranteed=6, burst=2)
    assert (Quota.objects.get(team=team).guaranteed, Quota.objects.get(team=team).burst) == (6, 2)
    with pytest.raises(ValidationError, match="already approved"):
        services.quota_request_approve(actor=admin, request=request)
    with pytest.raises(ValidationError, match="already approved"):
        services.quota_request_reject(actor=admin, request=request, note="no")


def test_only_platform_admins_decide(member, team, flavor):
    request = ask(member, team, flavor)
    team_admin = MembershipFactory(team=team, role=Role.ADMIN).user
    with pytest.raises(PermissionDenied):
        services.quota_request_approve(actor=team_admin, request=request)


def test_reject_needs_a_note_and_withdraw_only_while_pending(member, team, flavor, admin):
    request = ask(member, team, flavor)
    with pytest.raises(ValidationError, match="why"):
        services.quota_request_reject(actor=admin, request=request, note=" ")
    services.quota_request_withdraw(actor=member, request=request)
    with pytest.raises(ValidationError, match="already withdrawn"):
        services.quota_request_withdraw(actor=member, request=request)


def test_impact_shows_guarantees_headroom_and_whose_borrowing_shrinks(team, flavor):
    QuotaFactory(flavor=flavor, team=TeamFactory(slug="vision"), guaranteed=4, burst=8)
    QuotaFactory(flavor=flavor, team=TeamFactory(slug="recsys"), guaranteed=2, burst=1)
    effect = selectors.impact(flavor=flavor, team=team, guaranteed=8, burst=0)
    assert (effect.guaranteed_before, effect.guaranteed_after, effect.headroom_after) == (6, 14, 2)
    assert effect.team_share_after == pytest.approx(57.1)
    assert effect.shrinking == [("vision", 8, 2)]  # free capacity beyond guarantees drops from 10 to 2
    assert effect.fits


def test_time_boxed_grant_reverts_with_notice(member, team, flavor, admin, django_capture_on_commit_callbacks):
    QuotaFactory(team=team, flavor=flavor, guaranteed=2, burst=0)
    request = ask(member, team, flavor, ends_at=timezone.now() + timedelta(days=14))
    services.quota_request_approve(actor=admin, request=request)
    quota = Quota.objects.get(team=team)
    assert (quota.guaranteed, quota.revert_guaranteed) == (8, 2)
    Quota.objects.filter(pk=quota.pk).update(expires_at=timezone.now() + timedelta(days=2))
    MembershipFactory(team=team, role=Role.ADMIN, user__email="lead@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        assert services.quota_expire_due() == 0
    assert any("ends" in m.subject for m in mail.outbox)
    Quota.objects.filter(pk=quota.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    generation = TeamNamespace.objects.get(team=team).generation
    with django_capture_on_commit_callbacks(execute=True):
        assert services.quota_expire_due() == 1
    quota.refresh_from_db()
    assert (quota.guaranteed, quota.burst, quota.expires_at) == (2, 0, None)
    assert TeamNamespace.objects.get(team=team).generation == generation + 1


def test_suspended_teams_cannot_request(member, team, flavor):
    team.state = TeamState.SUSPENDED
    team.save()
    with pytest.raises(ValidationError, match="suspended"):
        ask(member, team, flavor)


def test_pending_queue_queries_do_not_grow_with_requests(flavor, admin, django_assert_max_num_queries):
    for _ in range(20):
        team = TeamFactory()
        TeamNamespaceFactory(team=team, cluster=flavor.cluster)
        QuotaRequestFactory(team=team, flavor=flavor, guaranteed=1, burst=0)
    with django_assert_max_num_queries(3):
        assert len(selectors.pending_with_impact(user=admin)) == 20
