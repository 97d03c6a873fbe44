"""Writes racing each other on PostgreSQL cannot together exceed a flavor's capacity."""

import threading
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from quotas import services
from quotas.models import Quota
from tenants import services as tenant_services
from tenants.choices import TeamState
from tenants.models import Team, TeamNamespace
from tests.conftest import require_postgresql
from tests.factories import GpuFlavorFactory, PlatformAdminFactory, TeamFactory, TeamNamespaceFactory
from tests.quotas.factories import QuotaRequestFactory


@pytest.mark.django_db(transaction=True)
def test_concurrent_approvals_never_exceed_capacity():
    require_postgresql()
    flavor = GpuFlavorFactory(capacity=16)
    requests = []
    for _ in range(6):
        team = TeamFactory()
        TeamNamespaceFactory(team=team, cluster=flavor.cluster)
        requests.append(QuotaRequestFactory(team=team, flavor=flavor, guaranteed=6, burst=0))
    admins = [PlatformAdminFactory() for _ in requests]
    barrier = threading.Barrier(len(requests))
    outcomes = []

    def approve(request, admin):
        try:
            barrier.wait()
            services.quota_request_approve(actor=admin, request=request)
            outcomes.append("approved")
        except ValidationError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=pair) for pair in zip(requests, admins, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["approved", "approved", "refused", "refused", "refused", "refused"]
    assert sum(q.guaranteed for q in Quota.objects.filter(flavor=flavor)) == 12


def waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # statistics are otherwise frozen for the transaction
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0]


def race(actions, *, hold):
    """Start every action in its own thread (its own connection) while this thread holds row locks on `hold`,
    rows each action writes after its capacity check and before it commits. Release them only once every action
    is blocked on a lock: without the flavor lock, several would have read Σ guaranteed by then, none seeing
    the others' changes. Returns what each action did."""
    outcomes = [None] * len(actions)

    def run(index, action):
        try:
            outcomes[index] = action()
        except ValidationError as exc:
            outcomes[index] = "refused: " + " ".join(exc.messages)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    with transaction.atomic():
        list(hold.select_for_update())
        for thread in threads:
            thread.start()
        for _ in range(3000):  # until every action waits on a lock (a poll, not a timing)
            if waiting_on_locks() >= len(actions):
                break
            threading.Event().wait(0.01)
        else:
            raise AssertionError("the actions never all waited on a lock")
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock or hang"
    return outcomes


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))  # the threads' order varies: several rounds meet more of them
def test_approval_expiry_and_resume_racing_never_over_commit(round_):
    """16 allowed. An expiring grant wants 2 → 10 back, a suspended team's 8 comes back on resume, and a request
    for 6 is approved: all at once. Any two fit, never all three; the flavor lock makes them queue."""
    require_postgresql()
    flavor = GpuFlavorFactory(capacity=16)
    admin = PlatformAdminFactory()

    def team():
        t = TeamFactory()
        TeamNamespaceFactory(team=t, cluster=flavor.cluster)
        return t

    Quota.objects.create(team=team(), flavor=flavor, guaranteed=2, revert_guaranteed=10,
                         expires_at=timezone.now() - timedelta(seconds=1))
    suspended = team()
    Quota.objects.create(team=suspended, flavor=flavor, guaranteed=8)
    Team.objects.filter(pk=suspended.pk).update(state=TeamState.SUSPENDED)
    request = QuotaRequestFactory(team=team(), flavor=flavor, guaranteed=6, burst=0)
    outcomes = race([
        lambda: services.quota_expire_due(),
        lambda: tenant_services.team_set_state(actor=admin, team=Team.objects.get(pk=suspended.pk),
                                               state=TeamState.ACTIVE).state,
        lambda: services.quota_request_approve(actor=admin, request=request).guaranteed,
    ], hold=TeamNamespace.objects.filter(cluster=flavor.cluster))
    active = Quota.objects.filter(flavor=flavor, team__state=TeamState.ACTIVE)
    held = sum(q.guaranteed for q in active)
    assert held <= 16, (outcomes, [(q.team.slug, q.guaranteed) for q in active])
    assert outcomes[0] == 1  # the grant ends either way: what does not fit is not restored
    assert sum(isinstance(o, str) and o.startswith("refused") for o in outcomes[1:]) <= 1, outcomes
