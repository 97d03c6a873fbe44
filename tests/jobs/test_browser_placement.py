"""In real headless Chromium: an engineer submits a job kept within one rack that may use spot, while reserved
capacity is full, and its page says where it was placed and why (spot fallback, the rack)."""

import time

import pytest

from jobs import services
from jobs import sync as job_sync
from jobs.models import Job
from portal import kube
from tests.jobs.test_placement import placement_setup
from tests.test_browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def ticking_sandbox():
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=0.1, simulation={"duration": 60, "startup": 0.5}) as sb:
        yield sb
    kube.forget_clients()


def test_a_rack_bound_spot_allowed_job_shows_where_and_why(browser, live_server, ticking_sandbox, run_on_commit):
    world = placement_setup(ticking_sandbox)
    with run_on_commit():  # reserved capacity full
        services.job_submit(actor=world["member"], team=world["team"], flavor=world["flavor"], kind="batch",
                            name="fills-reserved", image="ghcr.io/acme/eval:1", command=["eval"], workers=3,
                            gpus_per_worker=8, cpu_per_worker=4, memory_gib_per_worker=32)
    base = live_server.url
    page = browser.new_page()
    login(page, base, world["member"].username)
    page.goto(f"{base}/teams/nlp/jobs/new/batch/")
    page.select_option("select[name=flavor]", label=page.locator("select[name=flavor] option",
                                                                  has_text="· h100 (").inner_text())
    page.fill("input[name=name]", "rack-pair")
    page.fill("input[name=image]", "ghcr.io/acme/train:1.2")
    page.fill("input[name=command]", "python train.py")
    page.fill("input[name=workers]", "2")
    page.fill("input[name=gpus_per_worker]", "8")
    page.fill("input[name=cpu_per_worker]", "4")
    page.fill("input[name=memory_gib_per_worker]", "32")
    page.check("input[name=spot_allowed]")
    assert "can be reclaimed by its provider at any time" in page.inner_text("main form.form")
    page.select_option("select[name=topology_level]", "rack")
    page.check("input[name=topology_mode][value=required]")
    page.click("main form.form button[name=submit]")
    page.wait_for_url(f"{base}/jobs/*/")
    job = Job.objects.get(name="rack-pair")
    placed = ""
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not placed:
        job_sync.job_status_sync(cluster=world["cluster"])  # what the beat schedule does every few seconds
        page.wait_for_timeout(500)
        found = page.locator("#job-placement")
        placed = found.inner_text() if found.count() else ""
    assert placed == ("Placed on flavor h100-spot; spot capacity, because the reserved flavor h100 was full; it can "
                      "be evicted; all workers in rack s1 (as required).")
    assert "May run on spot" in page.inner_text("#job-status")
    assert Job.objects.get(pk=job.pk).placement["flavors"] == ["h100-spot"]
    page.close()
