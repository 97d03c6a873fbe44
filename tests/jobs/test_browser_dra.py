"""A DRA flavor end to end in real headless Chromium: the platform admin defines it in the console (and reads what
Kueue must be configured with), the team is granted quota in it, an engineer submits a job on it from the form and
sees it run, each worker holding an allocated ResourceClaim in the sandbox."""

import time

import pytest

from jobs import sync as job_sync
from jobs.models import Job
from portal import kube
from quotas import services as quota_services
from tenants.models import GpuFlavor
from tests.factories import PlatformAdminFactory
from tests.jobs.conftest import build_world, reconcile_cluster
from tests.jobs.test_browser_jobs import READ_STATUS
from tests.test_browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


@pytest.fixture
def dra_sandbox():
    """One node of eight H100s published by the simulated DRA driver, Kueue configured with its classes."""
    from sandbox import Sandbox
    from sandbox.simulator.dra import NVIDIA_MAPPINGS

    with Sandbox(simulate=True, tick=0.1, simulation={"duration": 5, "startup": 0.5, "dra_nodes": 1,
                                                      "kueue_mappings": NVIDIA_MAPPINGS}) as sb:
        yield sb
    kube.forget_clients()


def test_admin_defines_a_dra_flavor_and_an_engineer_runs_a_job_on_it(browser, live_server, dra_sandbox,
                                                                      run_on_commit):
    world = build_world(dra_sandbox.url, "kueue")
    admin = PlatformAdminFactory(username="admin")
    base = live_server.url
    page = browser.new_page()
    login(page, base, "admin")
    page.goto(f"{base}/console/flavors/new/")
    page.select_option("select[name=cluster]", str(world["cluster"].pk))
    page.fill("input[name=name]", "h100-dra")
    page.select_option("select[name=sharing]", "dra")
    page.fill("input[name=resource_name]", "gpu.nvidia.com/devices")
    page.fill("input[name=device_class]", "gpu.nvidia.com")
    page.fill("textarea[name=device_selector]", SELECTOR)
    page.fill("input[name=capacity]", "8")
    page.fill("textarea[name=node_labels]", "{}")
    page.click("#flavor-form button[type=submit]")
    page.wait_for_load_state()
    flavor = GpuFlavor.objects.get(name="h100-dra")
    page.goto(f"{base}/console/flavors/{flavor.pk}/")
    setup = page.inner_text("#cluster-setup")
    assert "deviceClassMappings" in setup and "gpu.nvidia.com/devices" in setup
    page.close()

    quota_services.quota_set(actor=admin, team=world["team"], flavor=flavor, guaranteed=4, burst=0, cpu_cores=64,
                             memory_gib=512)
    reconcile_cluster(world["cluster"])
    page = browser.new_page()
    login(page, base, world["member"].username)
    page.goto(f"{base}/teams/nlp/jobs/new/batch/")
    option = page.locator("select[name=flavor] option", has_text="h100-dra")
    assert "Dynamic Resource Allocation" in option.inner_text()
    page.select_option("select[name=flavor]", option.get_attribute("value"))
    page.fill("input[name=name]", "dra-eval")
    page.fill("input[name=image]", "ghcr.io/acme/eval:1")
    page.fill("input[name=command]", "python eval.py")
    page.fill("input[name=workers]", "2")
    page.fill("input[name=gpus_per_worker]", "2")
    page.fill("input[name=cpu_per_worker]", "4")
    page.fill("input[name=memory_gib_per_worker]", "32")
    with run_on_commit():
        page.click("main form.form button[name=submit]")
        page.wait_for_url(f"{base}/jobs/*/")
    job = Job.objects.get(name="dra-eval")
    claims = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        job_sync.job_status_sync(cluster=world["cluster"])
        state, _ = page.wait_for_function(READ_STATUS).json_value()
        if state == "Running":
            rt = dra_sandbox.store.kind("resource.k8s.io/v1", "ResourceClaim")
            claims = dra_sandbox.store.list(rt, job.team.namespace)["items"]
            break
        page.wait_for_timeout(300)
    assert state == "Running"
    assert len(claims) == 2 and all(len(c["status"]["allocation"]["devices"]["results"]) == 2 for c in claims)
    page.close()
