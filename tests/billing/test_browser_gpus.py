"""In real headless Chromium at 1440 and 390 px: the usage explorer drilled down team → flavor → job → each GPU of a
job running on a sandbox cluster (its pods' GPUs read from the sandbox's usage source), and the job page's way to
the same view. Idle GPUs are flagged, the chart and table fit the screen, the address keeps the level."""

import time
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from billing.models import JobUsageHour
from composition.demo.usage import ACTIVITY_ANNOTATION, ACTIVITY_ENV
from jobs import services as job_services
from portal import kube
from tests.factories import UsageHourFactory
from tests.jobs.conftest import build_world
from tests.test_browser import PASSWORD
from tests.test_browser_ux import OVERFLOW, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def running_sandbox():
    """A sandbox whose simulator runs admitted jobs in real time and never ends them by itself."""
    from sandbox import Sandbox

    with Sandbox(simulate=True, simulation={"duration": 10**7, "startup": 1}) as sb:
        yield sb
    kube.forget_clients()


def running_pods(cluster, job, count, timeout=30.0) -> list[dict]:
    client = kube.client_for_cluster(cluster)
    deadline = time.monotonic() + timeout
    while True:
        pods = client.list("v1", "Pod", namespace=job.team.namespace, label_selector=f"gpu-portal.io/job={job.pk}")
        if len([p for p in pods if (p.get("status") or {}).get("startTime")]) == count:
            return pods
        assert time.monotonic() < deadline, f"the sandbox did not start {count} pods: {pods}"
        time.sleep(0.25)


@pytest.fixture
def world(running_sandbox, run_on_commit):
    world = build_world(running_sandbox.url, "kueue", guaranteed=8, burst=0)
    team, flavor, member = world["team"], world["flavor"], world["member"]
    member.set_password(PASSWORD)
    member.save()
    with run_on_commit():
        job = job_services.job_submit(
            actor=member, team=team, flavor=flavor, kind="pytorch", name="bert-large", image="ghcr.io/acme/t:1",
            command=["torchrun", "train.py"], env={ACTIVITY_ENV: "idle-memory-held"}, workers=2,
            gpus_per_worker=4, cpu_per_worker=4, memory_gib_per_worker=32)
    pods = running_pods(world["cluster"], job, 2)
    # One worker gets busy; the other keeps 41.5 GiB per GPU and does nothing.
    busy = sorted(p["metadata"]["name"] for p in pods)[0]
    answer = requests.patch(f"{world['cluster'].server}/api/v1/namespaces/{team.namespace}/pods/{busy}",
                            json={"metadata": {"annotations": {ACTIVITY_ANNOTATION: "busy"}}},
                            headers={"Content-Type": "application/merge-patch+json"}, timeout=10)  # kubectl annotate
    assert answer.status_code == 200, answer.text
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    UsageHourFactory(team=team, flavor=flavor, hour=hour, allocated_gpu_hours=8, used_gpu_hours=4)
    JobUsageHour.objects.create(job=job, flavor=flavor, hour=hour, allocated_gpu_hours=8, used_gpu_hours=4,
                                utilisation_avg=0.5, gpu_memory_used_gib_avg=160)
    return {**world, "job": job, "busy": busy}


def test_the_usage_explorer_drills_down_to_each_gpu_and_fits_both_widths(browser, live_server, world):
    job, base = world["job"], live_server.url
    for width in (1440, 390):
        page = signed_in(browser, base, world["member"].username, width)
        page.goto(f"{base}/teams/nlp/usage/explore/")
        page.click("#explore-table a >> text=h100")
        page.wait_for_url(lambda url: "flavor=h100" in url)
        page.click("#explore-table a >> text=bert-large")
        page.wait_for_url(lambda url, job=job: f"job={job.pk}" in url)
        page.click("#per-gpu-link")
        page.wait_for_url(lambda url: "by=gpu" in url)
        page.wait_for_selector("#explore-chart .main-svg")
        assert page.locator("#explore-path").inner_text().endswith("bert-large › GPUs")
        rows = page.locator("#gpu-table tbody tr")
        assert rows.count() == 8
        texts = rows.all_inner_texts()
        flagged = [t for t in texts if "Idle: holds 41.5 GiB of memory per GPU but does no work" in t]
        assert len(flagged) == 4 and not any(world["busy"] in t for t in flagged), texts
        legend = page.locator("#explore-chart .legendtext").all_text_contents()
        if width == 1440:  # a line per GPU, named as the table names it
            assert legend == [t.split("\t")[0].removesuffix(" idle") for t in texts], (legend, texts)
        else:  # on a phone the table names them: eight legend entries would crowd out the plot
            assert legend == [], legend
        drawn = page.locator("#explore-chart").bounding_box()
        assert drawn["x"] >= 0 and drawn["x"] + drawn["width"] <= width and drawn["height"] > 300, (width, drawn)
        fit = page.evaluate(OVERFLOW)
        assert fit["out"] == [] and fit["scroll"] <= width, (width, fit)

        # The address is the view: opened afresh, and with another range picked, it is still each GPU of the job.
        shared = page.url
        page.goto(shared)
        page.wait_for_selector("#gpu-table")
        page.click(".presets a >> text=Last 30 days")
        page.wait_for_url(lambda url: "by=gpu" in url and "start=" in url)
        assert page.locator("#gpu-table tbody tr").count() == 8
        page.close()


def test_the_job_pages_gpu_activity_leads_to_each_gpu(browser, live_server, world):
    job, base = world["job"], live_server.url
    job.started_at = timezone.now() - timedelta(minutes=1)
    job.save(update_fields=["started_at"])
    page = signed_in(browser, base, world["member"].username, 390)
    page.goto(f"{base}/jobs/{job.pk}/")
    page.evaluate("document.getElementById('activity-slot').scrollIntoView()")
    page.click("#each-gpu-link")
    page.wait_for_url(lambda url: "by=gpu" in url and f"job={job.pk}" in url)
    assert page.locator("#gpu-table tbody tr").count() == 8
    page.close()
