"""In headless Chromium at desktop and phone widths: the evidence behind a quota request (its chart drawn and
filling its card), the right-sizing table, the capacity calendar and the booking form that shows it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from quotas import reservations
from tests.test_browser import PASSWORD
from tests.test_browser_ux import CHARTS, OVERFLOW, signed_in, world  # noqa: F401 - `world` is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
WIDTHS = (1440, 390)


def test_evidence_and_calendar_pages_fit_and_draw(browser, live_server, world):  # noqa: F811
    member, admin, flavor, team = world["member"], world["admin"], world["flavor"], world["team"]
    for user in (admin, member):
        user.set_password(PASSWORD)
        user.save()
    start = (timezone.now() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    booked = reservations.reservation_create(actor=member, team=team, flavor=flavor, units=4, starts_at=start,
                                             ends_at=start + timedelta(days=1), justification="Pre-training run")
    reservations.reservation_approve(actor=admin, reservation=booked)
    request = world["request"]
    base = live_server.url
    pages = {"admin": [f"/quota/requests/{request.pk}/evidence/", "/quota/rightsizing/",
                       f"/quota/calendar/{flavor.pk}/", "/console/reservations/"],
             member.username: [f"/quota/requests/{request.pk}/evidence/", f"/quota/calendar/{flavor.pk}/",
                               "/teams/nlp/reservations/new/", "/teams/nlp/quota/"]}
    for width in WIDTHS:
        for username, paths in pages.items():
            page = signed_in(browser, base, username, width)
            for path in paths:
                page.goto(f"{base}{path}")
                fit = page.evaluate(OVERFLOW)
                assert fit["out"] == [], f"{path} at {width} px: {fit['out']}"
                assert fit["scroll"] <= fit["width"], f"{path} at {width} px scrolls sideways: {fit}"
                if "evidence" in path:
                    assert page.inner_text("#evidence-sentence").startswith("nlp used 0 % of its 8")
                    page.wait_for_selector("#evidence-chart .main-svg", timeout=15_000)
                    for chart_id, chart, plot, card in page.evaluate(CHARTS):
                        assert abs(chart - card) <= 2 and abs(plot - card) <= 2, (path, width, chart_id, chart, plot,
                                                                                  card)
                if "calendar" in path or "reservations/new" in path:
                    row = page.locator(f"tr[data-day='{start:%Y-%m-%d}']")
                    assert row.get_attribute("data-free") == str(64 - 8 - 4)
            page.close()
