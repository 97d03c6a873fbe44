"""In real headless Chromium at 1440×900 and 390×844: a platform admin goes from the capacity page to the fair
sharing "what if" panel, tries another weight and half-life, sees the order change and the chart drawn in its card,
and a bad half-life answered beside its field; nothing sticks out sideways."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    PlatformAdminFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UsageHourFactory,
)
from tests.test_browser import PASSWORD
from tests.test_browser_ux import CHARTS, OVERFLOW

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_admin_tries_another_weight_and_half_life(browser, live_server, width, height):
    cluster = ClusterFactory(name="gpu-east")
    flavor = GpuFlavorFactory(cluster=cluster, name="h100")
    end = timezone.now().replace(minute=0, second=0, microsecond=0)
    for slug, hours_ago, units in (("nlp", 3, 8), ("vision", 1, 3)):
        team = TeamFactory(slug=slug, name=slug.upper())
        TeamNamespaceFactory(team=team, cluster=cluster)
        UsageHourFactory(team=team, flavor=flavor, hour=end - timedelta(hours=hours_ago), allocated_gpu_hours=units,
                         used_gpu_hours=0)
    PlatformAdminFactory(username="root")
    base = live_server.url

    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", "root")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    page.goto(f"{base}/console/capacity/")
    page.click("a:has-text('What if')")
    page.wait_for_url(f"{base}/console/clusters/gpu-east/fair-sharing/")
    page.wait_for_selector("#fair-sharing-chart.js-plotly-plot .main-svg", timeout=15_000)

    page.fill("input[name=half_life]", "2h")
    page.fill("input[name=weight_vision]", "3")
    page.click("#what-if-form button[type=submit]")
    page.wait_for_selector("#fair-sharing-chart.js-plotly-plot .main-svg", timeout=15_000)
    rows = page.locator("#what-if-table tbody tr")
    assert rows.nth(0).get_attribute("data-team") == "vision"  # 0.88 ÷ 3 before nlp's 1.17
    assert "↑1" in rows.nth(0).locator("td.place").inner_text()
    for chart_id, chart, drawn, inner in page.evaluate(CHARTS):
        assert abs(chart - inner) <= 2 and drawn <= inner + 2, (chart_id, chart, drawn, inner)
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"] and not layout["out"], layout

    page.fill("input[name=half_life]", "a week")
    page.click("#what-if-form button[type=submit]")
    page.wait_for_load_state()
    assert "not a duration" in page.locator("#id_half_life-error").inner_text()
    assert page.locator("#what-if-table").count() == 0
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"] and not layout["out"], layout
    page.close()
