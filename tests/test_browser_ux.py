"""The portal as its users meet it, in real headless Chromium at desktop (1600 and 1280 px) and phone (390 px) widths:
pages fit their screen (tables scroll in their own box, nothing sticks out), charts are as wide as their cards,
destructive actions ask first and say what will happen, forms keep what was typed with errors beside the fields,
and links are offered only to roles that can use them."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing import selectors as billing_selectors
from jobs import services as job_services
from jobs.models import Job
from quotas import services as quota_services
from tenants.choices import Role
from tests.factories import (
    MembershipFactory,
    PlatformAdminFactory,
    RateCardFactory,
    TeamFactory,
    UsageHourFactory,
    UserFactory,
)
from tests.jobs.conftest import build_world
from tests.test_browser import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
WIDTHS = (1600, 1280, 390)

# Elements that stick out of the screen sideways, leaving out what scrolls inside its own box (tables, YAML, logs).
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.querySelectorAll("header.topbar *, main *")) {
    const box = el.parentElement.closest(".table-scroll, pre, .js-plotly-plot, dialog, .visually-hidden");
    if (box) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.right > width + 1 || r.left < -1) out.push(`${el.tagName}.${el.className}#${el.id} ${r.left}..${r.right}`);
  }
  return {scroll: document.documentElement.scrollWidth, width, out: out.slice(0, 5)};
}"""
# Every chart against its card: [id, chart width, drawn plot width, card content width].
CHARTS = """() => [...document.querySelectorAll(".chart")].map(c => {
  const card = c.closest(".card"), style = getComputedStyle(card);
  const inner = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const svg = c.querySelector(".main-svg");
  return [c.id, c.getBoundingClientRect().width, svg ? svg.getBoundingClientRect().width : 0, inner];
})"""


@pytest.fixture
def world(sandbox, run_on_commit):
    world = build_world(sandbox.url, "kueue", guaranteed=8, burst=0)
    team, flavor, member = world["team"], world["flavor"], world["member"]
    world["admin"] = PlatformAdminFactory(username="admin")
    world["viewer"] = MembershipFactory(team=team, role=Role.VIEWER, user=UserFactory(username="vera")).user
    month_start = billing_selectors.month_bounds(billing_selectors.current_month())[0]
    RateCardFactory(flavor=flavor, price_per_gpu_hour=Decimal("2.00"), effective_from=month_start)
    for hour in range(0, 48, 6):
        UsageHourFactory(team=team, flavor=flavor, hour=month_start + timedelta(hours=hour))
    with run_on_commit():
        world["job"] = job_services.job_submit(
            actor=member, team=team, flavor=flavor, kind="pytorch", name="bert-large", image="ghcr.io/acme/t:1",
            command=["torchrun", "train.py", "--model", "bert large"], workers=2, gpus_per_worker=4,
            cpu_per_worker=4, memory_gib_per_worker=32)
    world["request"] = quota_services.quota_request_create(
        actor=member, team=team, flavor=flavor, guaranteed=16, burst=0, cpu_cores=64, memory_gib=512,
        justification="Pre-training needs twice the GPUs for two weeks")
    return world


def signed_in(browser, base, username, width):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    return page


def test_pages_fit_phones_and_desktops_and_charts_fill_their_cards(browser, live_server, world):
    for user in (world["admin"], world["member"]):
        user.set_password(PASSWORD)
        user.save()
    base, job = live_server.url, world["job"]
    pages = {"admin": ["/console/usage/", "/console/approvals/", "/console/teams/", "/console/clusters/",
                       "/console/capacity/", "/console/audit/", f"/jobs/{job.pk}/"],
             world["member"].username: ["/", "/jobs/", "/teams/nlp/", "/teams/nlp/quota/",
                                        "/teams/nlp/quota/request/", "/teams/nlp/usage/", "/tokens/",
                                        "/teams/nlp/jobs/new/pytorch/"]}
    for width in WIDTHS:
        for username, paths in pages.items():
            page = signed_in(browser, base, username, width)
            for path in paths:
                page.goto(f"{base}{path}")
                fit = page.evaluate(OVERFLOW)
                assert fit["out"] == [], f"{path} at {width} px: {fit['out']}"
                assert fit["scroll"] <= fit["width"], f"{path} at {width} px scrolls sideways: {fit}"
                if "usage" in path:
                    page.wait_for_function("() => document.querySelectorAll('.chart .main-svg').length >= 2")
                    for chart_id, chart, plot, card in page.evaluate(CHARTS):
                        assert abs(chart - card) <= 2 and abs(plot - card) <= 2, (path, width, chart_id, chart, plot,
                                                                                  card)
            page.close()

    # A chart follows its card when the window narrows after it was drawn.
    page = signed_in(browser, base, "admin", 1280)
    page.goto(f"{base}/console/usage/")
    page.wait_for_function("() => document.querySelectorAll('.chart .main-svg').length >= 4")
    page.set_viewport_size({"width": 390, "height": 900})
    page.wait_for_function(f"() => ({CHARTS})().every(([id, c, p, card]) => Math.abs(p - card) <= 2)")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.close()


def test_destructive_actions_ask_first_and_say_what_will_happen(browser, live_server, world):
    job, member = world["job"], world["member"]
    Job.objects.filter(pk=job.pk).update(state="running")
    base = live_server.url
    page = signed_in(browser, base, member.username, 390)

    page.goto(f"{base}/jobs/{job.pk}/")
    assert page.inner_text("#job-command") == "torchrun train.py --model 'bert large'"
    assert "2 workers × 4 GPUs" in page.inner_text("#job-size")
    assert "&id" not in page.inner_text("#job-yaml")
    page.click("button:has-text('Cancel job')")
    dialog = page.locator("#confirm-dialog")
    dialog.wait_for(state="visible")
    assert "Cancel job bert-large?" in dialog.inner_text()
    assert "8 GPUs will be released" in dialog.inner_text()
    page.click("#confirm-keep")
    dialog.wait_for(state="hidden")
    assert Job.objects.get(pk=job.pk).state == "running"  # keeping it did nothing

    page.goto(f"{base}/tokens/")
    page.fill("input[name=name]", "notebook")
    page.click("#token-create-form button[type=submit]")
    page.locator("#new-token-secret").wait_for()
    page.click("#token-table button:has-text('Revoke')")
    dialog.wait_for(state="visible")
    assert "stops working at once" in dialog.inner_text()
    page.click("#confirm-go")
    page.locator("#token-table td", has_text="revoked").wait_for()
    page.close()

    page = signed_in(browser, base, "admin", 1280)
    page.goto(f"{base}/console/teams/")
    page.click("#team-nlp button:has-text('Suspend')")
    dialog = page.locator("#confirm-dialog")
    dialog.wait_for(state="visible")
    assert "Nothing new is admitted" in dialog.inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    assert page.inner_text("#team-nlp .badge-team-active") == "Active"
    page.close()


def test_the_approval_form_keeps_what_was_typed_and_its_impact_follows_the_amounts(browser, live_server, world):
    pk, base = world["request"].pk, live_server.url
    page = signed_in(browser, base, "admin", 1280)
    page.goto(f"{base}/teams/nlp/")
    assert page.inner_text("#nav-approvals .nav-count") == "1"
    page.goto(f"{base}/console/approvals/")
    after = page.locator(f"#impact-{pk} [data-impact=guaranteed-after]")
    assert after.inner_text() == "16"
    assert page.locator(f"label[for=id_a{pk}-note]").inner_text() == "Note to the team (optional)"
    assert page.locator(f"label[for=id_r{pk}-note]").inner_text() == "Reason for rejecting"
    page.fill(f"#id_a{pk}-guaranteed", "12")
    page.wait_for_function(f"() => document.querySelector('#impact-{pk} [data-impact=guaranteed-after]')"
                           ".textContent.trim() === '12'")
    page.fill(f"#id_a{pk}-burst", "-2")
    page.fill(f"#id_a{pk}-note", "Twelve now; ask again once the first run is done")
    page.click(f"#approve-{pk} button[type=submit]")
    page.locator(f"#id_a{pk}-burst-error").wait_for()
    assert "greater than or equal to 0" in page.inner_text(f"#id_a{pk}-burst-error")
    assert page.input_value(f"#id_a{pk}-guaranteed") == "12"
    assert page.input_value(f"#id_a{pk}-burst") == "-2"
    assert page.input_value(f"#id_a{pk}-note") == "Twelve now; ask again once the first run is done"
    assert page.locator(f"#impact-{pk} [data-impact=guaranteed-after]").inner_text() == "12"
    page.fill(f"#id_a{pk}-burst", "0")
    page.click(f"#approve-{pk} button[type=submit]")
    page.locator(".message-success").wait_for()
    world["request"].refresh_from_db()
    assert (world["request"].state, world["request"].granted_guaranteed) == ("approved", 12)
    assert world["request"].decision_note == "Twelve now; ask again once the first run is done"
    page.close()


def test_links_are_offered_only_to_roles_that_can_use_them(browser, live_server, world):
    member, viewer = world["member"], world["viewer"]
    viewer.set_password(PASSWORD)
    viewer.save()
    MembershipFactory(team=TeamFactory(slug="vision", name="Vision"), user=member, role=Role.MEMBER)
    base = live_server.url

    page = signed_in(browser, base, "vera", 390)
    page.goto(f"{base}/jobs/")
    page.locator("#job-table").wait_for()
    assert page.locator(".new-job-menu").count() == 0
    page.goto(f"{base}/teams/nlp/quota/")
    page.locator("table.requests").wait_for()
    assert page.locator("button:has-text('Withdraw')").count() == 0
    page.close()

    page = signed_in(browser, base, member.username, 390)
    page.goto(f"{base}/jobs/")
    page.click(".new-job-menu summary")
    teams = page.locator(".new-job-team")
    teams.first.wait_for()
    assert teams.count() == 2  # one line per team, never run together
    labels = page.locator(".new-job-team .team-label").all_inner_texts()
    assert labels == [world["team"].name, "Vision"]
    for line in teams.all():
        assert line.locator("a").all_inner_texts() == ["PyTorch", "Ray", "Batch"]
    page.goto(f"{base}/teams/nlp/quota/")
    page.locator("button:has-text('Withdraw')").wait_for()
    page.close()


def test_the_job_page_draws_its_gpus_activity_and_memory_at_both_widths(browser, live_server, world):
    """A job's GPUs over time as Run:ai shows them: utilisation, SM and tensor-pipe activity and memory per GPU,
    drawn from the collected hours when the section scrolls into view, inside the screen on a desktop and a phone."""
    from billing import activity
    from billing.models import JobUsageHour

    job, member = world["job"], world["member"]
    member.set_password(PASSWORD)
    member.save()
    start = billing_selectors.floor_hour(job.submitted_at) + timedelta(hours=1)
    for n, (sm, tensor, memory) in enumerate([(0.9, 0.6, 60.0), (0.85, 0.0, 62.0), (0.02, 0.0, 70.0)]):
        JobUsageHour.objects.create(job=job, flavor=job.flavor, hour=start + timedelta(hours=n),
                                    allocated_gpu_hours=8, used_gpu_hours=Decimal(8 * sm), utilisation_avg=sm,
                                    utilisation_signal=activity.SM_ACTIVE, sm_active_avg=sm,
                                    tensor_active_avg=tensor, gpu_memory_used_gib_avg=memory * 8)
    for width in (1440, 390):
        page = signed_in(browser, live_server.url, member.username, width)
        page.goto(f"{live_server.url}/jobs/{job.pk}/")
        # The slot is swapped for the fragment once revealed: scroll in one step, whichever of the two is there.
        page.evaluate("document.getElementById('activity-slot').scrollIntoView()")
        page.wait_for_selector("#activity-chart .main-svg")
        legend = page.locator("#activity-chart .legendtext").evaluate_all("els => els.map(e => e.textContent)")
        assert legend == ["utilisation", "SM activity", "tensor pipe", "memory per GPU (GiB)"], legend
        drawn = page.locator("#activity-chart").bounding_box()
        assert drawn["x"] >= 0 and drawn["x"] + drawn["width"] <= width and drawn["height"] > 200, (width, drawn)
        fit = page.evaluate(OVERFLOW)  # the waiting job's "what would start it sooner" table scrolls in its box
        assert fit["out"] == [] and fit["scroll"] <= width, (width, fit)
        page.locator("#activity-slot summary").click()  # the figures behind the chart, one row an hour
        assert page.locator("#activity-table tbody tr").count() == 3
        page.close()


def test_the_usage_explorer_drills_down_and_fits_both_widths(browser, live_server, world):
    """Team → flavor → job, each step a link whose address is the view; the range picker keeps the drill-down."""
    member = world["member"]
    member.set_password(PASSWORD)
    member.save()
    today = timezone.now().date()
    for width in (1440, 390):
        page = signed_in(browser, live_server.url, member.username, width)
        page.goto(f"{live_server.url}/teams/nlp/usage/")
        page.click("#explore-link")
        page.wait_for_selector("#explore-table")
        first = (today - timedelta(days=29)).isoformat()  # the world's usage is early in the month
        page.fill("#id_start", first)
        page.click("#range-form button")
        page.wait_for_url(lambda url, first=first: f"start={first}" in url)
        page.click("#explore-table a >> text=h100")
        page.wait_for_url(lambda url, first=first: "flavor=h100" in url and f"start={first}" in url)  # range kept
        assert page.locator("#explore-path").inner_text().endswith("h100")
        page.wait_for_selector("#explore-chart .main-svg")
        fit = page.evaluate(OVERFLOW)
        assert fit["out"] == [] and fit["scroll"] <= width, (width, fit)
        page.close()


HEADER_ACTIONS = """() => {
  const header = document.querySelector(".page-header").getBoundingClientRect();
  const boxes = [...document.querySelectorAll(".page-header .actions > *")].map(e => e.getBoundingClientRect());
  return {right: header.right, tops: boxes.map(b => Math.round(b.top)), rights: boxes.map(b => b.right)};
}"""


def test_a_page_headers_actions_sit_together_at_its_right(browser, live_server, world):
    member = world["member"]
    member.set_password(PASSWORD)
    member.save()
    for width in (1440, 390):
        page = signed_in(browser, live_server.url, member.username, width)
        page.goto(f"{live_server.url}/jobs/")
        actions = page.evaluate(HEADER_ACTIONS)
        assert len(actions["tops"]) >= 2, actions  # the queue link and the New job menu
        assert abs(max(actions["rights"]) - actions["right"]) <= 2, (width, actions)  # flush right
        if width == 1440:
            assert len(set(actions["tops"])) == 1, actions  # one row, not New job alone on a line below
        page.close()
