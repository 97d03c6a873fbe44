""""In use" on the team's quota page follows the cluster: the jobs a simulating sandbox runs show in the status its
schedulers write (Kueue's ClusterQueue flavorsUsage, Volcano's Queue allocated, the ResourceQuota's used), and the
periodic sweep records that status even when it has nothing to write."""

import pytest
from django.urls import reverse

from composition import reconcile
from quotas import selectors
from tests.jobs.conftest import build_world, step
from tests.jobs.test_simulated import submit

pytestmark = pytest.mark.django_db


def in_use(client, world) -> tuple[int, str]:
    client.force_login(world["member"])
    page = client.get(reverse("quotas:team-quota", args=[world["team"].slug])).content.decode()
    [held] = selectors.team_held_quotas(team=world["team"])
    return held.in_use, page


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_the_quota_page_shows_the_gpus_of_running_jobs_after_a_sweep(simulating_sandbox, run_on_commit, client,
                                                                    backend):
    world = build_world(simulating_sandbox.url, backend, guaranteed=16, burst=0)
    assert in_use(client, world)[0] == 0
    submit(world, run_on_commit, name="train", workers=2, gpus_per_worker=4)
    submit(world, run_on_commit, name="eval", workers=1, gpus_per_worker=4)
    step(simulating_sandbox, 0)
    step(simulating_sandbox, 5)  # both running: 12 GPUs
    assert reconcile.reconcile_sweep()["writes"] == 0  # the cluster matches: status is read, nothing written
    units, page = in_use(client, world)
    assert units == 12
    assert "12 in use" in page
    step(simulating_sandbox, 105)  # both finished
    reconcile.reconcile_sweep()
    units, page = in_use(client, world)
    assert units == 0
    assert "0 in use" in page
