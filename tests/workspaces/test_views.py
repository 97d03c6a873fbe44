"""The workspace pages: the list and a workspace's page cost the same number of queries however many workspaces
and history events there are; the token is on the creation answer only; the form keeps to the platform's images."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from jobs.choices import JobState
from jobs.models import Job
from tenants.audit import audit_record
from tenants.choices import Role
from tests.factories import ClusterFactory, GpuFlavorFactory, MembershipFactory, PriorityTierFactory, TeamFactory
from workspaces.choices import Stage
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    cluster = ClusterFactory()
    flavor = GpuFlavorFactory(cluster=cluster, name="h100")
    team = TeamFactory(slug="nlp")
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    tier = PriorityTierFactory(name="standard", value=1000, is_default=True)
    client = Client()
    client.force_login(member)
    return {"cluster": cluster, "flavor": flavor, "team": team, "member": member, "tier": tier, "client": client}


def add(world, count, *, state=JobState.QUEUED, stage=Stage.ACTIVE, start=0):
    made = []
    for i in range(start, start + count):
        run = Job.objects.create(team=world["team"], cluster=world["cluster"], flavor=world["flavor"],
                                 priority_tier=world["tier"], kind="workspace", name=f"nb-{i}", image="jupyter/lab:1",
                                 submitted_by=world["member"], state=state)
        made.append(Workspace.objects.create(team=world["team"], cluster=world["cluster"], flavor=world["flavor"],
                                             priority_tier=world["tier"], owner=world["member"], name=f"nb-{i}",
                                             image="jupyter/lab:1", access_hash="digest", run=run, stage=stage))
    return made


def queries(client, path) -> int:
    with CaptureQueriesContext(connection) as seen:
        assert client.get(path).status_code == 200
    return len(seen)


def test_the_list_costs_the_same_for_2_and_30_workspaces(world, django_assert_max_num_queries):
    add(world, 2)
    few = queries(world["client"], "/workspaces/")
    add(world, 28, stage=Stage.WARNED, state=JobState.RUNNING, start=2)
    with django_assert_max_num_queries(few):
        page = world["client"].get("/workspaces/")
    assert page.content.decode().count('class="badge badge-warned"') == 28


@pytest.mark.parametrize("state", [JobState.QUEUED, JobState.RUNNING])
def test_a_workspace_page_costs_the_same_with_1_and_25_history_events(world, state, django_assert_max_num_queries):
    (workspace,) = add(world, 1, state=state)
    audit_record(actor=world["member"], action="workspace.create", obj=workspace, team=world["team"])
    path = f"/workspaces/{workspace.pk}/"
    one = queries(world["client"], path)
    for n in range(24):
        audit_record(actor=None, action="workspace.warn", obj=workspace, team=world["team"],
                     after={"reason": f"idle {n}", "activity": {"verdict": "does no work (SM activity 0.0 %)"}})
    with django_assert_max_num_queries(one):
        page = world["client"].get(path)
    text = page.content.decode()
    assert text.count("does no work (SM activity 0.0 %)") == 24
    assert "port-forward service/" in text and "Access token" not in text


def test_the_token_is_shown_on_creation_only(world, settings, django_capture_on_commit_callbacks):
    from quotas import services as quota_services
    from tests.factories import PlatformAdminFactory, TeamNamespaceFactory

    TeamNamespaceFactory(team=world["team"], cluster=world["cluster"])
    quota_services.quota_set(actor=PlatformAdminFactory(), team=world["team"], flavor=world["flavor"], guaranteed=8,
                             burst=0, cpu_cores=64, memory_gib=512)
    form = {"name": "lab", "tool": "jupyterlab", "image": settings.WORKSPACE_IMAGES["jupyterlab"][0],
            "flavor": world["flavor"].pk, "gpus": 1, "cpu": 2, "memory_gib": 8, "volume_gib": 10}
    refused = world["client"].post("/teams/nlp/workspaces/new/", {**form, "image": "docker.io/me/any:1"})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    created = world["client"].post("/teams/nlp/workspaces/new/", form)
    assert created.status_code == 201 and "no-store" in created["Cache-Control"]
    token = created.context["token"]
    assert token in created.content.decode()
    workspace = Workspace.objects.get(name="lab")
    assert token not in workspace.access_hash and token not in str(workspace.run.env)
    again = world["client"].get(f"/workspaces/{workspace.pk}/").content.decode()
    assert token not in again and "Access token" not in again


def test_another_teams_workspace_is_not_found(world):
    (workspace,) = add(world, 1)
    outsider = MembershipFactory(team=TeamFactory(slug="vision"), role=Role.ADMIN).user
    client = Client()
    client.force_login(outsider)
    assert client.get(f"/workspaces/{workspace.pk}/").status_code == 404
    assert client.post(f"/workspaces/{workspace.pk}/suspend/").status_code == 404
