"""The Python client against a live portal (live_server) with a real token, and a sandbox that runs the jobs.

The sandbox's clock is the test's: the client's own polling advances it (as time would pass between two polls)
and runs the job status sync that beat runs in production, so wait() sees queued → admitted → running → done."""

import io

import pytest
import requests
from gpu_portal_client import (
    AuthenticationError,
    JobFailed,
    NotFound,
    PermissionDenied,
    Portal,
    RateLimited,
    ValidationError,
)

from jobs import sync as job_sync
from tenants.choices import Role
from tests.api.world import token_for
from tests.factories import MembershipFactory, PlatformAdminFactory, TeamFactory
from tests.jobs.conftest import build_world
from tests.jobs.conftest import step as sandbox_step

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running_sandbox():
    from portal import kube
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=None, simulation={"duration": 100, "startup": 5}) as sb:
        yield sb
    kube.forget_clients()


class ClockedSession(requests.Session):
    """Before each read of a job, 20 simulated seconds pass on the cluster and the status sync runs."""

    def __init__(self, sandbox, cluster):
        super().__init__()
        self.sandbox, self.cluster, self.clock = sandbox, cluster, 0.0

    def request(self, method, url, *args, **kwargs):
        if method == "GET" and "/api/v1/jobs/" in url:
            sandbox_step(self.sandbox, self.clock)
            job_sync.job_status_sync(cluster=self.cluster)
            self.clock += 20
        return super().request(method, url, *args, **kwargs)


@pytest.fixture
def world(running_sandbox):
    return build_world(running_sandbox.url, "kueue", guaranteed=8, burst=8)


@pytest.fixture
def portal(live_server, world, running_sandbox):
    return Portal(live_server.url, token_for(world["member"]), session=ClockedSession(running_sandbox,
                                                                                       world["cluster"]))


def test_three_lines_from_a_notebook(portal, world):
    job = portal.submit_pytorch(name="finetune", image="ghcr.io/acme/train:1.2", command=["torchrun", "train.py"],
                                flavor="h100", workers=2, gpus_per_worker=4, cpu_per_worker=4,
                                memory_gib_per_worker=32)
    assert (job.state, job.gpus, job.team) == ("queued", 8, "nlp")  # applied on commit, waiting
    line = io.StringIO()
    assert job.wait(progress=True, poll_seconds=0.01, timeout=60, stream=line) is job
    assert job.state == "succeeded" and job.terminal
    shown = line.getvalue()
    assert f"\rjob {job.id} finetune: " in shown and "running" in shown and shown.endswith("\n")
    logs = job.logs()
    assert logs.startswith("==> ") and f"finetune-{job.id}" in logs
    assert "kind: Job" in job.yaml() or "kind: PyTorchJob" in job.yaml()


def test_a_queued_job_says_why_and_can_be_cancelled(portal, world):
    portal.submit_batch(name="first", image="ghcr.io/acme/eval:1", command=["python", "eval.py"], flavor="h100",
                        gpus_per_worker=8, cpu_per_worker=4, memory_gib_per_worker=32)
    second = portal.submit_batch(name="second", image="ghcr.io/acme/eval:1", command=["python", "eval.py"],
                                 flavor="h100", gpus_per_worker=8, cpu_per_worker=4, memory_gib_per_worker=32)
    third = portal.submit_batch(name="third", image="ghcr.io/acme/eval:1", command=["python", "eval.py"],
                                flavor="h100", gpus_per_worker=8, cpu_per_worker=4, memory_gib_per_worker=32)
    third.refresh()
    assert third.state == "queued"
    assert third.why_waiting().startswith("Waiting for 8 nvidia.com/gpu of flavor h100")
    assert third.cancel().cancel_requested_at
    with pytest.raises(JobFailed, match="cancelled"):
        third.wait(poll_seconds=0.01, timeout=30, raise_on_failure=True)
    again = third.resubmit()
    assert again.resubmit_of == third.id and again.id not in (second.id, third.id)


def test_a_training_loop_reports_its_progress(portal, world):
    job = portal.submit_pytorch(name="finetune", image="ghcr.io/acme/train:1.2", command=["torchrun", "train.py"],
                                flavor="h100", workers=1, gpus_per_worker=8, cpu_per_worker=4,
                                memory_gib_per_worker=32)
    for step in (100, 250):
        reported = job.report_progress(done=step, total=1000)
    assert (reported["done"], reported["percentage"], reported["reports"]) == (250, 25.0, 2)
    assert job.progress == reported and job.refresh().progress == reported
    assert portal.report_progress(job.id, done=300, total=1000)["done"] == 300
    with pytest.raises(ValidationError) as refused:
        job.report_progress(done=1001, total=1000)
    assert "done" in refused.value.fields
    with pytest.raises(NotFound):
        portal.report_progress(10**9, done=1, total=2)


def test_quota_and_listing(portal, world):
    (quota,) = portal.quota()
    assert (quota["flavor"], quota["guaranteed_units"], quota["burst_units"]) == ("h100", 8, 8)
    for n in range(3):
        portal.submit_batch(name=f"sweep-{n}", image="ghcr.io/acme/eval:1", command=["python"], flavor="h100",
                            cpu_per_worker=1, memory_gib_per_worker=1)
    names = [j["name"] for j in portal.jobs(kind="batch")]
    assert names == ["sweep-2", "sweep-1", "sweep-0"]
    assert [j["name"] for j in portal.pages("jobs/", page_size=1)] == names  # follows the cursor links


def test_errors_are_typed_and_carry_the_apis_words(portal, world, live_server):
    with pytest.raises(ValidationError) as bad:
        portal.submit_pytorch(name="huge", image="ghcr.io/acme/train:1", command=["torchrun"], flavor="h100",
                              workers=4, gpus_per_worker=8)
    assert bad.value.status == 400 and "could never start" in bad.value.fields["workers"][0]
    assert "workers" in str(bad.value)
    with pytest.raises(NotFound):
        portal.job(999999)
    with pytest.raises(AuthenticationError, match="not valid"):
        Portal(live_server.url, "gpp_0123456789_" + "A" * 43).me()
    viewer = MembershipFactory(team=world["team"], role=Role.VIEWER).user
    with pytest.raises(PermissionDenied):
        Portal(live_server.url, token_for(viewer)).submit_batch(name="x", image="ghcr.io/acme/eval:1",
                                                               command=["python"], flavor="h100")
    with pytest.raises(TypeError, match="list of arguments"):
        portal.submit_batch(name="x", image="ghcr.io/acme/eval:1", command="python eval.py", flavor="h100")


def test_a_user_in_several_teams_names_the_team(portal, world, live_server):
    MembershipFactory(team=TeamFactory(slug="vision"), user=world["member"], role=Role.MEMBER)
    with pytest.raises(ValueError, match="Name the team: you belong to 2"):
        portal.quota()
    assert portal.quota(team="nlp")[0]["flavor"] == "h100"


def test_rate_limits_are_their_own_error(portal, settings):
    settings.API_THROTTLE_RATE = "2/day"  # a day-long window: the three calls never straddle two
    portal.me()
    portal.me()
    with pytest.raises(RateLimited) as limited:
        portal.me()
    assert limited.value.retry_after > 0


def test_the_token_never_shows_in_the_client(portal):
    assert "gpp_" not in repr(portal)


def test_usage_and_statement(portal, world):
    from billing.selectors import current_month

    month = current_month()
    usage = portal.usage()
    assert (usage["team"], usage["start"], usage["days"]) == ("nlp", f"{month:%Y-%m-%d}", [])
    statement = portal.statement()
    assert (statement["team"], statement["month"]) == ("nlp", f"{month:%Y-%m}")
    with pytest.raises(ValidationError) as bad:
        portal.statement("2026-13")
    assert "month" in bad.value.fields


def test_evidence_and_rightsizing(portal, world, live_server):
    asked = portal.request_quota(flavor="h100", guaranteed_units=12, justification="Next quarter's pre-training")
    found = portal.quota_evidence(asked["id"])
    assert found["team"] == world["team"].slug and found["guaranteed_units"] == 8
    assert found["sentence"].startswith(f"{world['team'].slug} used 0 % of its 8 h100 units at p95")
    assert len(found["hours"]) == 720
    with pytest.raises(PermissionDenied):
        portal.rightsizing()  # a member, not a team admin
    admin = MembershipFactory(team=world["team"], role=Role.ADMIN).user
    rows = Portal(live_server.url, token_for(admin)).rightsizing()
    assert [(r["team"], r["flavor"], r["guaranteed_units"]) for r in rows] == [(world["team"].slug, "h100", 8)]


def test_reservations_and_the_calendar(portal, world, live_server):
    from datetime import UTC, datetime, timedelta

    start = (datetime.now(UTC) + timedelta(days=3)).replace(minute=0, second=0, microsecond=0)
    booked = portal.reserve(flavor="h100", units=4, starts_at=start.isoformat(),
                            ends_at=(start + timedelta(days=1)).isoformat(), justification="Pre-training next week")
    assert booked["state"] == "pending" and booked["units"] == 4
    assert [r["id"] for r in portal.reservations(state="pending")] == [booked["id"]]
    admin = Portal(live_server.url, token_for(PlatformAdminFactory()))
    assert admin.post(f"reservations/{booked['id']}/approve/")["state"] == "booked"
    days = {d["day"]: d for d in portal.calendar("h100", days=7)["days"]}
    assert days[start.date().isoformat()]["by_team"][world["team"].slug] == 8 + 4
    assert portal.cancel_reservation(booked["id"])["state"] == "cancelled"
    with pytest.raises(ValidationError):
        portal.reserve(flavor="h100", units=4, starts_at=start.isoformat(), ends_at=start.isoformat(),
                       justification="An empty window is refused")
