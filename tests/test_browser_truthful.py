"""Pages that neither lie nor strand, seen in headless Chromium as a member, a viewer, a team admin and a platform
admin: no template source on a page, a preempted or refused job that says what it is and offers what can be done,
no Cancel a member may not use, a refused form that brings its errors into view, a token page that a reload does
not repeat."""

import json
import urllib.request
from datetime import timedelta

import pytest

from jobs import services as job_services
from jobs.models import Job
from tenants.choices import Role
from tenants.models import AccessToken
from tests.factories import MembershipFactory, UserFactory
from tests.test_browser import PASSWORD
from tests.test_browser_ux import signed_in, world  # noqa: F401 - the shared page fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _password(*users):
    for user in users:
        user.set_password(PASSWORD)
        user.save()


def test_the_jobs_page_shows_no_template_source(browser, live_server, world):  # noqa: F811
    _password(world["member"])
    page = signed_in(browser, live_server.url, world["member"].username, 1440)
    page.goto(f"{live_server.url}/jobs/")
    page.locator("#job-table").wait_for()
    text, source = page.inner_text("main"), page.content()
    assert "{#" not in text and "#}" not in text
    assert "While a job" not in source  # not even where the layout happens to hide it
    page.close()


def test_a_preempted_job_says_it_queues_again_and_offers_cancel(browser, live_server, world):  # noqa: F811
    job, member = world["job"], world["member"]
    _password(member)
    # The cluster's admission time is whole seconds, a fraction before the portal's own submission time.
    Job.objects.filter(pk=job.pk).update(
        state="preempted", admitted_at=job.submitted_at - timedelta(seconds=1),
        state_message="Preempted to accommodate a workload (UID: a, JobUID: b) due to prioritization in the "
                      "ClusterQueue")
    page = signed_in(browser, live_server.url, member.username, 390)
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    outcome = page.inner_text("#job-outcome")
    assert "queues again by itself" in outcome and "Resubmit" not in outcome
    assert page.locator("#job-status button:has-text('Cancel job')").count() == 1
    assert "waited -" not in page.inner_text(".timeline")
    assert "waited 0 s" in page.inner_text(".timeline")
    page.close()


def test_a_job_the_cluster_refused_reads_failed_with_the_reason_in_words(browser, live_server, sandbox, world):  # noqa: F811,E501
    member, team, flavor = world["member"], world["team"], world["flavor"]
    _password(member)
    fault = {"verb": "apply", "resource": "jobs", "namespace": team.namespace, "count": 1, "status": 422,
             "reason": "Invalid", "message": 'admission webhook "images.policy.example.com" denied the request: '
                                             "registry.example.com is not an allowed registry"}
    request = urllib.request.Request(f"{sandbox.url}/_sandbox/faults", data=json.dumps(fault).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=5).close()
    job = job_services.job_submit(actor=member, team=team, flavor=flavor, kind="batch", name="untrusted",
                                  image="registry.example.com/x:1", command=["python", "main.py"])
    job.refresh_from_db()  # reconciled as the submission committed, and refused
    assert (job.state, job.sync_state) == ("failed", "rejected")
    job_services.job_reconcile(job_id=job.pk)  # the cluster would accept it now: a refused job stays refused
    job.refresh_from_db()
    assert (job.state, job.sync_state) == ("failed", "rejected")

    page = signed_in(browser, live_server.url, member.username, 1440)
    page.goto(f"{live_server.url}/jobs/")
    row = page.locator("#job-table tr", has_text="untrusted")
    assert row.locator(".badge").inner_text() == "Failed"
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    assert page.inner_text("#job-state") == "Failed"
    outcome = page.inner_text("#job-outcome")
    assert "would not create this job" in outcome and "images.policy.example.com" in outcome
    assert "not an allowed registry" in outcome
    assert page.locator("button:has-text('Cancel job')").count() == 0
    assert page.locator("button:has-text('Resubmit')").count() == 1
    page.close()


def test_members_are_offered_only_what_they_may_do(browser, live_server, world):  # noqa: F811
    job, team = world["job"], world["team"]
    Job.objects.filter(pk=job.pk).update(state="running")
    teammate = MembershipFactory(team=team, role=Role.MEMBER, user=UserFactory(username="tom")).user
    admin = MembershipFactory(team=team, role=Role.ADMIN, user=UserFactory(username="ada")).user
    _password(teammate, world["viewer"], world["member"])
    base = live_server.url

    page = signed_in(browser, base, "tom", 390)
    page.goto(f"{base}/jobs/{job.pk}/")
    page.locator("#job-state").wait_for()
    assert page.locator("button:has-text('Cancel job')").count() == 0  # the submitter's or an admin's to cancel
    page.close()
    page = signed_in(browser, base, world["member"].username, 390)
    page.goto(f"{base}/jobs/{job.pk}/")
    assert page.locator("button:has-text('Cancel job')").count() == 1
    page.close()

    page = signed_in(browser, base, "vera", 390)
    response = page.goto(f"{base}/teams/{team.slug}/quota/request/")
    assert response.status == 403
    assert page.locator("form textarea").count() == 0  # refused before anything is typed
    assert f"ask a member or its admins ({admin.username})" in page.inner_text("#not-allowed")
    page.goto(f"{base}/quota/requests/")
    note = page.inner_text("#viewer-note")
    assert admin.username in note and "request its quota" in note
    page.click("#viewer-note a")
    assert page.url.endswith(f"/teams/{team.slug}/quota/")
    page.close()

    page = signed_in(browser, base, world["member"].username, 390)
    page.goto(f"{base}/quota/requests/")
    page.click("#request-teams a")
    assert page.url.endswith(f"/teams/{team.slug}/quota/request/")
    page.close()


def test_a_refused_form_brings_its_errors_into_view(browser, live_server, world):  # noqa: F811
    pk, base = world["request"].pk, live_server.url
    page = signed_in(browser, base, "admin", 1440)
    page.goto(f"{base}/console/approvals/")
    page.fill(f"#id_a{pk}-burst", "-2")
    page.click(f"#approve-{pk} button[type=submit]")
    error = page.locator(f"#id_a{pk}-burst-error")
    error.wait_for()
    assert page.evaluate("location.hash") == f"#approve-{pk}"
    assert page.evaluate(f"document.querySelector('#approve-{pk}').getBoundingClientRect().top") < 900

    page.goto(f"{base}/teams/nlp/usage/")
    page.fill("#budget-form input[name=amount]", "-5")
    page.click("#budget-form button[type=submit]")
    page.locator("#budget-form .error").first.wait_for()
    assert page.evaluate("location.hash") == "#budget-heading"
    top = page.evaluate("document.querySelector('#budget-form').getBoundingClientRect().top")
    assert 0 <= top < 900
    page.close()

    _password(world["member"])
    page = signed_in(browser, base, world["member"].username, 1440)
    page.goto(f"{base}/teams/nlp/jobs/new/pytorch/")
    page.select_option("#id_flavor", str(world["flavor"].pk))
    page.fill("#id_image", "ghcr.io/acme/train:1")
    page.click("button[name=preview]")
    page.locator("#yaml-preview").wait_for()
    assert page.evaluate("location.hash") == "#yaml-preview"
    assert page.evaluate("document.querySelector('#yaml-preview').getBoundingClientRect().top") < 900
    page.close()


def test_a_new_token_is_shown_once_copied_and_not_created_again_by_a_reload(browser, live_server, world):  # noqa: F811,E501
    member = world["member"]
    _password(member)
    page = signed_in(browser, live_server.url, member.username, 390)
    page.goto(f"{live_server.url}/tokens/")
    page.fill("input[name=name]", "notebook")
    page.click("#token-create-form button[type=submit]")
    secret = page.inner_text("#new-token-secret")
    assert secret.startswith("gpp_")
    page.click("#copy-token")
    page.wait_for_function("() => document.querySelector('#copy-token').textContent === 'Copied'")
    page.reload()
    assert AccessToken.objects.filter(user=member).count() == 1
    assert page.locator("#new-token-secret").count() == 0  # shown only once
    assert page.locator("#token-table td", has_text="notebook").count() == 1
    page.close()


def test_the_command_box_is_as_wide_as_the_form(browser, live_server, world):  # noqa: F811
    _password(world["member"])
    page = signed_in(browser, live_server.url, world["member"].username, 1440)
    page.goto(f"{live_server.url}/teams/nlp/jobs/new/pytorch/")
    command = page.evaluate("document.querySelector('#id_command').getBoundingClientRect().width")
    form = page.evaluate("document.querySelector('main form.form').getBoundingClientRect().width")
    assert command >= 0.9 * form and command > 500
    page.close()


def test_a_team_page_leads_with_what_a_member_does(browser, live_server, world):  # noqa: F811
    _password(world["member"])
    page = signed_in(browser, live_server.url, world["member"].username, 390)
    page.goto(f"{live_server.url}/teams/nlp/")
    page.locator("#team-spend #usage-facts").wait_for()  # this month's spend, loaded after the page
    assert "cost to date" in page.inner_text("#team-spend").lower()
    page.click(".new-job-menu summary")
    page.click(".new-job-team a:has-text('Batch')")
    assert page.url.endswith("/teams/nlp/jobs/new/batch/")
    page.goto(f"{live_server.url}/teams/nlp/")
    # The Kubernetes objects follow, folded: the page does not open with NetworkPolicy and RoleBinding tables.
    assert not page.locator("#namespaces table.objects").first.is_visible()
    page.close()


def _on_screen(page, selector: str) -> bool:
    return page.evaluate("""(selector) => {
      const el = document.querySelector(selector);
      if (!el) return false;
      const r = el.getBoundingClientRect();
      return r.width > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth + 1;
    }""", selector)


def test_phones_show_each_tables_key_column_without_scrolling(browser, live_server, world):  # noqa: F811
    member, base, pk = world["member"], live_server.url, world["request"].pk
    _password(member)
    page = signed_in(browser, base, member.username, 390)
    page.goto(f"{base}/jobs/")
    assert _on_screen(page, "#job-table tbody tr:first-child td:nth-child(7) .badge")  # State
    page.goto(f"{base}/teams/nlp/quota/")
    assert _on_screen(page, "#quota-table tbody tr:first-child td:nth-child(5)")  # In use
    page.goto(f"{base}/teams/nlp/usage/statements/" + page.evaluate("new Date().toISOString().slice(0, 7)") + "/")
    assert _on_screen(page, "#statement-total")  # Cost
    page.close()
    page = signed_in(browser, base, "admin", 390)
    page.goto(f"{base}/console/usage/")
    assert _on_screen(page, "#team-costs tbody tr:first-child td:nth-child(6)")  # Cost
    page.goto(f"{base}/console/approvals/")
    assert _on_screen(page, f"#impact-{pk} [data-impact=guaranteed-after]")  # the approval's "after"
    page.close()


def test_the_submit_form_keeps_its_cost_estimate_current(browser, live_server, world):  # noqa: F811
    _password(world["member"])
    page = signed_in(browser, live_server.url, world["member"].username, 390)
    page.goto(f"{live_server.url}/teams/nlp/jobs/new/pytorch/")
    page.select_option("#id_flavor", str(world["flavor"].pk))
    page.fill("#id_workers", "2")
    page.fill("#id_gpus_per_worker", "4")
    page.fill("#id_max_runtime_minutes", "600")
    page.wait_for_function("() => document.querySelector('#cost-estimate').textContent.includes('160 USD')")
    assert page.inner_text("#cost-estimate") == \
        "About 16.00 USD per hour at today's rates, 160 USD at its runtime limit."
    page.close()


def test_the_queue_view_fits_both_widths_and_shows_positions(browser, live_server, world):  # noqa: F811
    from tests.test_browser_ux import OVERFLOW

    job, member = world["job"], world["member"]
    _password(member)
    Job.objects.filter(pk=job.pk).update(state="queued")
    for width in (1440, 390):
        page = signed_in(browser, live_server.url, member.username, width)
        page.goto(f"{live_server.url}/jobs/")
        page.click(f"a:has-text('Queue · {world['cluster'].name}')")
        row = page.locator("table.queue-table tbody tr").first
        assert row.get_attribute("data-position") == "1" and "bert-large" in row.inner_text()
        fit = page.evaluate(OVERFLOW)
        assert fit["out"] == [] and fit["scroll"] <= fit["width"], (width, fit)
        assert page.locator("#queue-quota tr[data-flavor=h100] [data-cell=borrowed]").is_visible()
        assert world["team"].name in page.inner_text("#cohort-tree")
        page.goto(f"{live_server.url}/jobs/{job.pk}/")
        page.click("#queue-link")
        assert page.url.endswith(f"?team={world['team'].slug}")
        page.close()
