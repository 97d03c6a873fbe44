"""Screenshots of the main pages at desktop and phone widths, for comparing one change with the next.

Run against a running demo (`make run`, then `make screenshots`); writes full-page PNGs into a git-ignored folder and
prints, for every page, whether it scrolls sideways at that width. With `--docs DIR` it also writes the first screen
of the pages the documentation shows (DOCS) into DIR (the committed docs/images/), under stable names.
"""

import argparse
import os
import re
import sys
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

PASSWORD = "demo-gpu-portal"
WIDTHS = {"desktop": 1440, "phone": 390}
# The pages the documentation shows (docs/*.md), by the file name they are shown under: `<name>-1440.png` and
# `<name>-390.png`. Only the first screen is kept, so the committed images stay small.
DOCS = {
    ("erin", "/jobs/"): "jobs",
    ("erin", "/teams/nlp/jobs/new/pytorch/"): "submit-pytorch",
    ("erin", "job:pretrain-7b"): "job-waiting",
    ("erin", "/queue/gpu-east/"): "queue",
    ("erin", "/teams/nlp/quota/"): "team-quota",
    ("erin", "/teams/nlp/usage/"): "team-usage",
    ("erin", "gpus:llama-finetune"): "usage-explorer-gpus",
    ("erin", "/tokens/"): "tokens",
    ("admin", "/console/capacity/"): "console-capacity",
    ("admin", "/console/approvals/"): "console-approvals",
}


# (user, path): the pages a platform admin, a team admin, a team member and a viewer meet first. A name in a path
# ("job:<name>") is the demo job of that name, found on the jobs page; "gpus:<name>" is the usage explorer's view of
# each GPU of that job, as its page links to it.
PAGES = [
    ("admin", "/"),
    ("admin", "/console/approvals/"),
    ("admin", "/console/capacity/"),
    ("admin", "/console/clusters/"),
    ("admin", "/console/clusters/gpu-west/"),
    ("admin", "/console/teams/"),
    ("admin", "/console/usage/"),
    ("admin", "/console/audit/"),
    ("admin", "/api/docs/"),
    ("erin", "/"),
    ("erin", "/teams/nlp/"),
    ("erin", "/teams/nlp/quota/"),
    ("erin", "/teams/nlp/quota/request/"),
    ("erin", "/teams/nlp/usage/"),
    ("erin", "/jobs/"),
    ("erin", "/teams/nlp/jobs/new/pytorch/"),
    ("erin", "/tokens/"),
    ("erin", "job:llama-finetune"),
    ("bob", "job:nightly-benchmark"),
    ("heidi", "job:ranker-untrusted"),
    ("dave", "/teams/nlp/usage/"),
    ("carol", "/jobs/"),
    ("carol", "/teams/ml-research/"),
    ("carol", "/teams/ml-research/quota/request/"),
    ("carol", "/quota/requests/"),
    ("erin", "/queue/gpu-east/"),
    ("admin", "/queue/gpu-west/"),
]
PAGES += [page for page in DOCS if page not in PAGES]
def _name(user: str, path: str, width: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"
    return f"{user}-{slug}-{width}.png"


def _job_path(page, base: str, name: str) -> str | None:
    page.goto(f"{base}/jobs/")
    link = page.locator("#job-table a[href^='/jobs/']", has_text=name).first
    return link.get_attribute("href") if link.count() else None


def _gpus_path(page, base: str, name: str) -> str | None:
    job = _job_path(page, base, name)
    if not job:
        return None
    page.goto(f"{base}{job}")
    page.evaluate("document.getElementById('activity-slot').scrollIntoView()")
    try:
        page.wait_for_selector("#each-gpu-link", timeout=10_000)
    except PlaywrightTimeout:
        return None
    return page.get_attribute("#each-gpu-link", "href")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--out", default="screenshots")
    parser.add_argument("--docs", help="also write the documentation's screenshots (DOCS) into this folder")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    docs = Path(args.docs) if args.docs else None
    if docs:
        docs.mkdir(parents=True, exist_ok=True)
    chromium = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    wide = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        for width_name, width in WIDTHS.items():
            contexts = {}
            for user, path in PAGES:
                if user not in contexts:
                    context = browser.new_context(viewport={"width": width, "height": 900})
                    page = context.new_page()
                    page.goto(f"{args.base}/login/")
                    page.fill("input[name=username]", user)
                    page.fill("input[name=password]", PASSWORD)
                    page.click("main button[type=submit]")
                    page.wait_for_load_state()
                    contexts[user] = page
                page = contexts[user]
                label = path
                if path.startswith(("job:", "gpus:")):
                    kind, name = path.split(":", 1)
                    found = (_job_path if kind == "job" else _gpus_path)(page, args.base, name)
                    if not found:
                        print(f"  no {'running ' if kind == 'gpus' else ''}job named {name} in the demo",
                              file=sys.stderr)
                        continue
                    path = found
                page.goto(f"{args.base}{path}")
                try:  # pages that poll (live jobs, queues) may never be idle for long: shoot them as they are
                    page.wait_for_load_state("networkidle", timeout=10_000)
                except PlaywrightTimeout:
                    pass
                page.screenshot(path=str(out / _name(user, label, width_name)), full_page=True)
                if docs and (user, label) in DOCS:
                    page.evaluate("window.scrollTo(0, 0)")
                    page.screenshot(path=str(docs / f"{DOCS[user, label]}-{width}.png"))
                scroll = page.evaluate("document.documentElement.scrollWidth")
                if scroll > width:
                    wide.append(f"{user} {path} at {width} px: page is {scroll} px wide")
        browser.close()
    print(f"Screenshots in {out}/")
    for line in wide:
        print("  scrolls sideways:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
