"""The journey in real headless Chromium: the admin sees a team's namespace applied; a member requests quota,
the admin approves it, and the team page shows the scheduler queue applied in the (sandbox) cluster."""

import pytest

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
    page.select_option("select[name=flavor]", label="gpu-east · h100 (nvidia.com/gpu): holds none")
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
    # The team page folds its Kubernetes objects away once they are applied: unfold them as a person would.
    for summary in page.locator("details.objects-details:not([open]) > summary").all():
        summary.click()
    body = page.inner_text("body")
    assert "ClusterQueue" in body and "LocalQueue" in body
    row = page.locator("tr", has_text="ClusterQueue").first
    assert "applied" in row.inner_text().lower()
    page.close()

