"""The queue view of a cluster: each team's waiting jobs in admission order with their position, its quota per
flavor (nominal, in use, borrowed, unused) and the cohort tree; another team's queue is not shown, nor found."""

import pytest

from jobs.models import Job
from tenants.models import PriorityTier
from tests.api.world import build_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return build_world()


def _queued(world, name, tier, **fields):
    job = Job.objects.get(pk=world.job.pk)
    job.pk = None
    job.name, job.state, job.priority_tier = name, "queued", PriorityTier.objects.get_or_create(
        name=tier, defaults={"value": {"urgent": 100000, "standard": 1000, "low": 10}[tier]})[0]
    for key, value in fields.items():
        setattr(job, key, value)
    job.save()
    return job


def test_waiting_jobs_are_in_admission_order_with_their_position(client, world):
    Job.objects.filter(pk=world.job.pk).update(state="running")  # holds 8 h100s of the 8 guaranteed
    _queued(world, "first-standard", "standard")
    _queued(world, "later-urgent", "urgent")
    _queued(world, "last-low", "low")
    client.force_login(world.member)
    response = client.get(f"/queue/{world.cluster.name}/")
    assert response.status_code == 200
    [queue] = response.context["queues"]  # erin's team only: vision's waiting job is not hers to see
    assert [(j.position, j.name) for j in queue.jobs] == [(1, "later-urgent"), (2, "first-standard"), (3, "last-low")]
    quota = {(r["team"], r["flavor"]): r for r in response.context["quota"]}
    assert set(quota) == {("nlp", "h100")}
    assert quota[("nlp", "h100")]["nominal"] == 8
    tree = dict(response.context["tree"])
    assert [row.team.slug for rows in tree.values() for row in rows] == ["nlp"]
    page = response.content.decode()
    assert 'data-position="1"' in page and "later-urgent" in page


def test_a_platform_admin_sees_every_team_and_a_stranger_finds_no_other_teams_queue(client, world):
    _queued(world, "waiting", "standard")
    Job.objects.filter(pk=world.other_job.pk).update(state="queued")
    client.force_login(world.platform_admin)
    teams = [q.team.slug for q in client.get(f"/queue/{world.cluster.name}/").context["queues"]]
    assert teams == ["nlp", "vision"]
    only = client.get(f"/queue/{world.cluster.name}/", {"team": "vision"}).context["queues"]
    assert [q.team.slug for q in only] == ["vision"]
    client.force_login(world.outsider)
    assert client.get(f"/queue/{world.cluster.name}/", {"team": "nlp"}).status_code == 404
    assert client.get("/queue/no-such-cluster/").status_code == 404
