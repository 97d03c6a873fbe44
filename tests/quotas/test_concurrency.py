"""Two platform admins approving at the same moment cannot together exceed a flavor's capacity."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from quotas import services
from quotas.models import Quota
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
