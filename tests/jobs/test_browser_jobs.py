"""The job journey in real headless Chromium against a sandbox that runs jobs on the wall clock: a member submits
a PyTorch job from the form and watches its page go queued → running → succeeded without reloading it."""

import time

import pytest

from jobs import services
from jobs import sync as job_sync
from jobs.models import Job
from portal import kube
from tests.jobs.conftest import build_world
from tests.test_browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
# The job's state and its "why waiting" sentence (or null), read together once the state is on the page.
READ_STATUS = """() => {
  const state = document.querySelector("#job-state");
  const why = document.querySelector("#why-waiting");
  return state ? [state.textContent.trim(), why ? why.textContent.trim() : null] : null;
}"""


@pytest.fixture
def ticking_sandbox():
    """Jobs start half a second after admission and run five seconds."""
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=0.1, simulation={"duration": 5, "startup": 0.5}) as sb:
        yield sb
    kube.forget_clients()


def test_submit_a_pytorch_job_and_watch_it_run(browser, live_server, ticking_sandbox, run_on_commit):
    world = build_world(ticking_sandbox.url, "kueue", guaranteed=8, burst=0)
    with run_on_commit():
        blocker = services.job_submit(actor=world["member"], team=world["team"], flavor=world["flavor"],
                                      kind="batch", name="blocker", image="ghcr.io/acme/eval:1", command=["eval"],
                                      workers=1, gpus_per_worker=8, cpu_per_worker=4, memory_gib_per_worker=32)
    ticking_sandbox.simulator.plan("nlp", blocker.object_name, duration=8)
    base = live_server.url
    page = browser.new_page()
    login(page, base, world["member"].username)

    page.goto(f"{base}/teams/nlp/jobs/new/pytorch/")
    page.select_option("select[name=flavor]", index=1)
    page.fill("input[name=name]", "bert-finetune")
    page.fill("input[name=image]", "ghcr.io/acme/train:1.2")
    page.fill("input[name=command]", "torchrun train.py --epochs 3")
    page.fill("input[name=workers]", "2")
    page.fill("input[name=gpus_per_worker]", "4")
    page.fill("input[name=cpu_per_worker]", "4")
    page.fill("input[name=memory_gib_per_worker]", "32")
    page.click("main form.form button[name=submit]")
    page.wait_for_url(f"{base}/jobs/*/")
    job = Job.objects.get(name="bert-finetune")
    assert page.url == f"{base}/jobs/{job.pk}/"
    page.evaluate("window.stillTheSamePage = true")

    seen, why = [], ""
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        job_sync.job_status_sync(cluster=world["cluster"])  # what the beat schedule does every few seconds
        # One read of both in the page's own turn: the status block swaps itself every 2 s, so counting an element
        # and then reading it could straddle a swap.
        state, waiting = page.wait_for_function(READ_STATUS).json_value()
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == "Queued" and waiting:
            why = waiting
        if state == "Succeeded":
            break
        page.wait_for_timeout(300)
    assert [s for s in seen if s in ("Queued", "Running", "Succeeded")] == ["Queued", "Running", "Succeeded"], seen
    assert why.startswith("Waiting for 8 nvidia.com/gpu of flavor h100: team quota 8 guaranteed + 0 burst")
    assert "insufficient unused quota for nvidia.com/gpu in flavor h100" in why
    assert page.evaluate("window.stillTheSamePage") is True  # the page refreshed itself, nobody reloaded it
    timeline = page.inner_text("ol.timeline")
    assert "Admitted" in timeline and "Started" in timeline and "Finished" in timeline
    assert page.locator("button", has_text="Resubmit").count() == 1
    page.close()
