"""A workspace's page in real headless Chromium at desktop (1440×900) and phone (390×844) sizes: a member starts
a workspace from the form and is shown its token once and the port-forward command; its GPUs go idle, the page
warns with "Keep it running", which works; then Suspend and Resume. Nothing sticks out sideways at either size."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import sync as job_sync
from portal import kube
from tests.jobs.conftest import T0, build_world
from tests.test_browser import login
from tests.workspaces.test_simulated import set_activity
from workspaces import culling
from workspaces.models import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SIZES = [(1440, 900), (390, 844)]
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth, out = [];
  for (const el of document.querySelectorAll("header.topbar *, main *")) {
    if (el.parentElement.closest(".table-scroll, pre, dialog, .visually-hidden")) continue;
    const r = el.getBoundingClientRect();
    if (r.width && r.height && (r.right > width + 1 || r.left < -1)) out.push(`${el.tagName}#${el.id} ${r.right}`);
  }
  return {scroll: document.documentElement.scrollWidth, width, out: out.slice(0, 5)};
}"""


@pytest.fixture
def sandbox():
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=None, simulation={"duration": 10**7, "startup": 5}) as sb:
        yield sb
    kube.forget_clients()


def fits(page) -> None:
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["width"] and not found["out"], found


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_start_warn_keep_suspend_resume(browser, live_server, sandbox, settings, width, height, tmp_path):
    settings.WORKSPACE_WARN_MINUTES, settings.WORKSPACE_SUSPEND_MINUTES = 10, 5
    world = build_world(sandbox.url, "volcano", guaranteed=8, burst=0)
    base = live_server.url
    page = browser.new_page(viewport={"width": width, "height": height})
    login(page, base, world["member"].username)

    page.goto(f"{base}/workspaces/")
    page.click("text=New workspace · nlp")
    page.fill("input[name=name]", "notebook")
    page.select_option("select[name=flavor]", index=1)
    page.fill("input[name=gpus]", "4")
    page.fill("input[name=volume_gib]", "25")
    page.click("main form.form button[type=submit]")
    page.wait_for_selector("#token-value")
    token = page.inner_text("#token-value").strip()
    workspace = Workspace.objects.get(name="notebook")
    assert len(token) >= 40 and token not in workspace.access_hash
    assert page.inner_text("#port-forward").startswith(f"kubectl -n nlp port-forward service/{workspace.object_name}")
    fits(page)
    page.screenshot(path=str(tmp_path / f"created-{width}.png"), full_page=True)

    sandbox.simulator.step(T0)
    sandbox.simulator.step(T0 + 10)
    job_sync.job_status_sync(cluster=world["cluster"])
    set_activity(world, Workspace.objects.get(pk=workspace.pk), "idle")
    now = timezone.now()
    culling.workspace_cull_all(now=now)
    culling.workspace_cull_all(now=now + timedelta(minutes=11))
    page.goto(f"{base}/workspaces/{workspace.pk}/")
    assert page.inner_text("#workspace-stage") == "Warned: idle"
    assert token not in page.content()  # shown once, never again
    banner = page.locator("#idle-banner")
    assert "Does no work (SM activity 0.0 %) for 11.0 min." in banner.inner_text()
    fits(page)
    page.screenshot(path=str(tmp_path / f"warned-{width}.png"), full_page=True)
    page.click("#keep-running")
    page.wait_for_selector("text=Kept running")
    assert page.inner_text("#workspace-stage") == "Active"
    assert "workspace.keep" in page.inner_text("#workspace-events")

    page.click("text=Suspend")
    page.wait_for_selector("#suspended-banner")
    assert "25 GiB home volume is kept" in page.inner_text("#suspended-banner")
    fits(page)
    page.click("#resume")
    page.wait_for_selector("text=Resumed")
    assert page.inner_text("#workspace-stage") == "Active" and page.inner_text("#run-state") == "Queued"
    events = page.inner_text("#workspace-events")
    for action in ("workspace.create", "workspace.warn", "workspace.keep", "workspace.suspend", "workspace.resume"):
        assert action in events
    fits(page)
