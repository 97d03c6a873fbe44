"""The console's and a member's journeys in real headless Chromium, each test walking several pages in one browser
(the live server is shared): registering a cluster after testing its connection, the capacity edit that explains
its effect, the job list's filters, the quota request form, a job Preview that cannot fit, the log download, the
404 and 403 pages, and a destructive action confirmed without JavaScript."""

import pytest

from jobs.models import Job
from quotas.models import QuotaRequest
from tenants.models import Cluster
from tests.test_browser import PASSWORD
from tests.test_browser_ux import signed_in, world  # noqa: F401  (the shared world fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_console_registers_a_cluster_and_explains_capacity_edits(browser, live_server, world):  # noqa: F811
    from sandbox import Sandbox

    world["admin"].set_password(PASSWORD)
    world["admin"].save()
    base = live_server.url
    page = signed_in(browser, base, "admin", 1280)

    page.goto(f"{base}/console/clusters/new/")
    page.fill("input[name=name]", "gpu-north")
    page.fill("input[name=display_name]", "GPU North")
    page.select_option("select[name=connection]", "sandbox")
    page.fill("input[name=server]", "http://127.0.0.1:9")  # nothing listens there
    page.click("#cluster-form button[name=test]")
    result = page.locator("#connection-result")
    result.wait_for()
    assert result.inner_text().startswith("Could not connect:")
    assert page.input_value("input[name=name]") == "gpu-north"  # what was typed is kept
    assert Cluster.objects.filter(name="gpu-north").count() == 0

    with Sandbox() as north:
        page.fill("input[name=server]", north.url)
        page.click("#cluster-form button[name=test]")
        page.wait_for_function("() => document.querySelector('#connection-result')"
                               ".textContent.includes('Connected')")
        assert "Kubernetes v" in page.inner_text("#connection-result")
        assert Cluster.objects.filter(name="gpu-north").count() == 0  # testing saves nothing
        page.click("#cluster-form button[name=save]")
        page.wait_for_url(lambda url: "/new/" not in url)
        assert Cluster.objects.get(name="gpu-north").server == north.url
        assert "gpu-north" in page.inner_text("main")

    # The flavor form says what a capacity edit means before it is saved.
    page.goto(f"{base}/console/flavors/{world['flavor'].pk}/")
    effect = page.locator("#capacity-effect")
    assert "With a capacity of 64" in effect.inner_text()
    assert page.locator("[data-effect=over]").count() == 0
    page.fill("input[name=capacity]", "4")
    page.locator("[data-effect=over]").wait_for()
    assert "Changing the capacity from 64 to 4" in page.inner_text("#capacity-effect")
    assert "exceed what the flavor can give by 4" in page.inner_text("[data-effect=over]")
    page.fill("input[name=capacity]", "32")
    page.wait_for_function("() => document.querySelector('[data-effect=headroom]')?.textContent.trim() === '24'")
    assert page.locator("[data-effect=over]").count() == 0
    page.close()


def test_a_member_filters_jobs_asks_for_quota_previews_and_downloads_logs(browser, live_server, world):  # noqa: F811
    member, job, pending = world["member"], world["job"], world["request"]
    member.set_password(PASSWORD)
    member.save()
    base = live_server.url
    page = signed_in(browser, base, member.username, 1280)

    # Job list filters: labelled, and a name typed in another case still finds the flavor.
    page.goto(f"{base}/jobs/")
    for label in ("State", "Kind", "Submitted by", "Flavor"):
        assert page.locator("#job-filters label", has_text=label).count() == 1
    page.fill("#job-filters input[name=flavor]", "H100")
    page.click("#job-filters button[type=submit]")
    page.wait_for_url(lambda url: "flavor=" in url)
    assert page.locator("#job-table tbody tr a", has_text="bert-large").count() == 1
    page.fill("#job-filters input[name=flavor]", "a100")
    page.click("#job-filters button[type=submit]")
    page.locator("#job-table td.empty", has_text="No jobs match.").wait_for()

    # The quota request form shows what the team holds and refuses a second pending request for the flavor.
    page.goto(f"{base}/teams/nlp/quota/request/")
    held = page.inner_text("#held-table")
    assert "h100" in held and "8" in held
    assert f"#{pending.pk}" in page.inner_text("#pending-note")
    page.select_option("select[name=flavor]", str(world["flavor"].pk))
    page.fill("input[name=guaranteed]", "24")
    page.fill("textarea[name=justification]", "A second ask for the same flavor")
    page.click("main form.form button[type=submit]")
    page.locator(".errors, .error").first.wait_for()
    assert f"#{pending.pk}" in page.inner_text("main form.form")
    assert page.input_value("input[name=guaranteed]") == "24"
    assert QuotaRequest.objects.filter(team=world["team"]).count() == 1

    # Preview runs Submit's feasibility check: a job larger than the team's limit is refused inline, no YAML.
    page.goto(f"{base}/teams/nlp/jobs/new/pytorch/")
    page.select_option("select[name=flavor]", index=1)
    page.fill("input[name=name]", "too-big")
    page.fill("input[name=image]", "ghcr.io/acme/train:1.2")
    page.fill("input[name=workers]", "20")
    page.fill("input[name=gpus_per_worker]", "8")
    page.click("main form.form button[name=preview]")
    error = page.locator("#id_workers-error")
    error.wait_for()
    assert "160 GPUs is more than the team's h100 limit of 8" in error.inner_text()
    assert "it could never start" in error.inner_text()
    assert page.locator("#yaml-preview").count() == 0 and page.input_value("input[name=workers]") == "20"
    assert not Job.objects.filter(name="too-big").exists()

    # The whole log comes as a file.
    page.goto(f"{base}/jobs/{job.pk}/")
    with page.expect_download() as download:
        page.click("#download-logs")
    assert download.value.suggested_filename == f"{job.object_name}-logs.txt"
    assert download.value.path().read_text()  # "==> pod (phase) <==" sections, or "No pods."

    # Dead ends explain themselves: another team's or a missing job is a 404 page, the console a 403 page.
    response = page.goto(f"{base}/jobs/{job.pk + 1000}/")
    assert response.status == 404 and page.locator("#not-found").count() == 1
    assert page.locator("#not-found a", has_text="Jobs").count() == 1
    response = page.goto(f"{base}/console/usage/")
    assert response.status == 403 and "Not allowed" in page.inner_text("#not-allowed h1")
    page.close()


def test_without_javascript_a_cancel_asks_on_a_page_of_its_own(browser, live_server, world):  # noqa: F811
    member, job = world["member"], world["job"]
    member.set_password(PASSWORD)
    member.save()
    Job.objects.filter(pk=job.pk).update(state="running")
    base = live_server.url
    context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", member.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)

    page.goto(f"{base}/jobs/{job.pk}/")
    page.click("button:has-text('Cancel job')")
    page.locator("#confirm-page").wait_for()
    assert "Cancel job bert-large?" in page.inner_text("#confirm-page h1")
    assert "8 GPUs will be released" in page.inner_text("#confirm-consequence")
    assert Job.objects.get(pk=job.pk).cancel_requested_at is None
    page.click("#confirm-back")
    page.wait_for_url(f"{base}/jobs/{job.pk}/")
    assert Job.objects.get(pk=job.pk).cancel_requested_at is None
    page.click("button:has-text('Cancel job')")
    page.click("#confirm-yes")
    page.wait_for_url(f"{base}/jobs/{job.pk}/")
    assert Job.objects.get(pk=job.pk).cancel_requested_at is not None
    context.close()
