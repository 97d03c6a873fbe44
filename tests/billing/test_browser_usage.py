"""In real headless Chromium: a team member opens the usage page and a Plotly chart renders from the portal's own
static plotly.js (no network); the statement page offers the CSV download."""

from datetime import timedelta
from decimal import Decimal

import pytest

from billing import selectors
from tenants.choices import Role
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    RateCardFactory,
    TeamFactory,
    UsageHourFactory,
    UserFactory,
)
from tests.test_browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_usage_page_renders_a_chart(browser, live_server):
    month_start = selectors.month_bounds(selectors.current_month())[0]
    flavor = GpuFlavorFactory(cluster=ClusterFactory(name="gpu-east"), name="h100")
    RateCardFactory(flavor=flavor, price_per_gpu_hour=Decimal("2.00"), effective_from=month_start)
    team = TeamFactory(slug="nlp", name="NLP")
    MembershipFactory(team=team, user=UserFactory(username="erin"), role=Role.VIEWER)
    for hour in range(3):
        UsageHourFactory(team=team, flavor=flavor, hour=month_start + timedelta(hours=hour), allocated_gpu_hours=4,
                         used_gpu_hours=1)
    base = live_server.url

    page = browser.new_page()
    outside = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base) else None)
    login(page, base, "erin")
    page.goto(f"{base}/teams/nlp/")
    page.click("a:has-text('Usage')")
    page.wait_for_url(f"{base}/teams/nlp/usage/")
    page.wait_for_selector("#usage-chart.js-plotly-plot .plot-container", timeout=15_000)
    page.wait_for_selector("#cost-chart.js-plotly-plot", timeout=15_000)
    assert "24.00 USD" in page.inner_text("#usage-facts")  # 12 GPU-hours × 2.00
    page.click("a:has-text('Statement')")
    assert page.locator("#statement-total").inner_text() == "24.00"
    assert page.locator("#download-csv").get_attribute("href").endswith(".csv")
    assert outside == [], f"the pages fetched from outside the portal: {outside}"
    page.close()
