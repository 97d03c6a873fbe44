"""The Content-Security-Policy in real headless Chromium: each main page of the portal (htmx, Plotly charts, quota
bars), the API docs (Swagger UI, Redoc) and the Django admin load with no CSP violation in the console, fetch nothing
from any other host, and still work (charts drawn, bars sized, docs rendered)."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from billing.selectors import floor_hour
from tests.api.world import build_world
from tests.factories import UsageHourFactory
from tests.test_browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every violation the page meets, whether Chromium logs it or not; added before any page script runs.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  const where = `${e.sourceFile}:${e.lineNumber}`;
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${where}`);
});
"""


def visit(page, base, path: str) -> dict:
    console, outside = [], []

    def on_console(message):
        console.append(message.text)

    def on_request(request):
        if not request.url.startswith((base, "data:", "blob:")):
            outside.append(request.url)

    page.on("console", on_console)
    page.on("request", on_request)
    try:
        response = page.goto(f"{base}{path}")
        page.wait_for_load_state("networkidle")
    finally:
        page.remove_listener("console", on_console)
        page.remove_listener("request", on_request)
    assert response.status == 200, path
    assert "script-src 'self'" in response.headers["content-security-policy"]
    violations = page.evaluate("window.__cspViolations")
    refused = [text for text in console if "Content Security Policy" in text or "Refused to" in text]
    return {"violations": violations + refused, "outside": outside}


PAGES = ["/", "/teams/nlp/", "/teams/nlp/quota/", "/teams/nlp/quota/request/", "/jobs/", "/jobs/{job}/",
         "/teams/nlp/jobs/new/pytorch/", "/teams/nlp/usage/", "/quota/requests/", "/tokens/", "/console/clusters/",
         "/console/teams/", "/console/approvals/", "/console/capacity/", "/console/tiers/", "/console/usage/",
         "/console/rates/", "/console/audit/", "/django-admin/", "/api/docs/", "/api/redoc/"]


def test_every_main_page_passes_the_content_security_policy(browser, live_server):
    world = build_world()
    first = floor_hour(timezone.now()).replace(day=1, hour=0)  # usage this month, so the heatmap is drawn
    for team in (world.team, world.other_team):
        for day in range(3):
            UsageHourFactory(team=team, flavor=world.flavor, hour=first + timedelta(days=day), allocated_gpu_hours=8,
                             used_gpu_hours=2 + day)
    base = live_server.url
    context = browser.new_context()
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    anonymous = visit(page, base, "/login/")
    assert anonymous == {"violations": [], "outside": []}
    login(page, base, world.platform_admin.username)
    failures = {}
    for path in PAGES:
        path = path.format(job=world.job.pk)
        seen = visit(page, base, path)
        if seen["violations"] or seen["outside"]:
            failures[path] = seen
        if path == "/teams/nlp/usage/" or path == "/console/usage/":
            assert page.locator(".plotly-chart .main-svg").count() >= 2, f"charts not drawn on {path}"
        if path == "/console/usage/":  # the heatmap's bitmap is scaled up sharp, not smoothed into a blur
            assert page.locator("#heatmap image").evaluate("e => getComputedStyle(e).imageRendering") == "pixelated"
        if path == "/console/capacity/":
            assert page.locator(".bar-guaranteed").first.evaluate("e => e.style.width").endswith("%")
        if path == "/api/docs/":
            page.wait_for_selector(".swagger-ui .info .title")
            assert "GPU Portal API" in page.inner_text(".swagger-ui .info .title")
        if path == "/api/redoc/":
            page.wait_for_selector("h1")
            assert "GPU Portal API" in page.inner_text("h1")
    context.close()
    assert failures == {}, json.dumps(failures, indent=1)
