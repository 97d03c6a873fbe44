"""The journey in real headless Chromium: the admin sees a team's namespace applied; a member requests quota,
the admin approves it, and the team page shows the scheduler queue applied in the (sandbox) cluster."""

import os

import pytest
from django.db import connections

from tenants import services as tenant_services
from tenants.choices import Role
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    UserFactory,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-tests-only"


@pytest.fixture
def browser(monkeypatch):
    path = os.environ.get("CHROMIUM_PATH", "")
    if not path or not os.path.exists(path):
        if os.environ.get("REQUIRE_SERVICES"):
            pytest.fail("CHROMIUM_PATH must point at Chromium in this run")
        pytest.skip("CHROMIUM_PATH is not set: the browser journey needs Debian's chromium")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        yield launched
        launched.close()
        # The ORM calls made while Playwright's loop ran used their own connection; close it before the
        # test database is dropped.
        connections.close_all()


def login(page, base, username):
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_load_state()


def test_admin_sees_namespace_then_member_requests_and_admin_approves(browser, live_server, sandbox):
    cluster = ClusterFactory(name="gpu-east", server=sandbox.url, scheduler="kueue", cohort="gpu-east")
    GpuFlavorFactory(cluster=cluster, name="h100", capacity=32)
    PriorityTierFactory(name="standard", value=1000)
    admin = PlatformAdminFactory(username="admin")
    team = tenant_services.team_create(actor=admin, slug="nlp", name="Natural Language")
    member = UserFactory(username="erin")
    MembershipFactory(team=team, user=member, role=Role.MEMBER)
    base = live_server.url

    page = browser.new_page()
    login(page, base, "admin")
    page.goto(f"{base}/teams/nlp/")
    assert page.get_by_text("Namespace").first.is_visible()
    assert "applied" in page.inner_text("body").lower()
    page.close()

    page = browser.new_page()
    login(page, base, "erin")
    page.goto(f"{base}/teams/nlp/quota/request/")
    page.select_option("select[name=flavor]", label="gpu-east · h100 (nvidia.com/gpu)")
    page.fill("input[name=guaranteed]", "8")
    page.fill("input[name=burst]", "4")
    page.fill("textarea[name=justification]", "Fine-tuning the summariser for two weeks")
    page.click("main form.form button[type=submit]")
    page.wait_for_url(f"{base}/teams/nlp/quota/")
    assert "Pending" in page.inner_text("body")
    page.close()

    page = browser.new_page()
    login(page, base, "admin")
    page.goto(f"{base}/console/approvals/")
    card = page.locator("article.approval").first
    assert "Σ guaranteed after" in card.inner_text()
    card.locator("button", has_text="Approve").click()
    page.wait_for_load_state()
    assert "approved" in page.inner_text("body").lower()
    page.goto(f"{base}/teams/nlp/")
    body = page.inner_text("body")
    assert "ClusterQueue" in body and "LocalQueue" in body
    row = page.locator("tr", has_text="ClusterQueue").first
    assert "applied" in row.inner_text().lower()
    page.close()

