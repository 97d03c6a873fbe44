"""The demo shows the portal's own 404 and 403 pages, never Django's debug page listing every URL."""

import os
import subprocess
import sys

import pytest

from tests.factories import MembershipFactory, TeamFactory, UserFactory


def test_the_demo_runs_without_debug_unless_asked():
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_DEBUG", "PORTAL_MODE")}
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    run = lambda extra: subprocess.run([sys.executable, "-c", code], env={**env, **extra,  # noqa: E731
                                       "DJANGO_SETTINGS_MODULE": "config.settings"},
                                       capture_output=True, text=True, check=True).stdout.strip()
    assert run({}) == "False"
    assert run({"DJANGO_DEBUG": "1"}) == "True"


@pytest.mark.django_db
def test_not_found_and_not_allowed_pages_point_somewhere(client):
    user = UserFactory()
    team = TeamFactory(slug="nlp")
    MembershipFactory(team=team, user=user, role="viewer")
    client.force_login(user)
    page = client.get("/no-such-page/")
    assert page.status_code == 404
    text = page.content.decode()
    assert "Not found" in text and "/no-such-page/" in text and "URLconf" not in text
    assert 'href="/jobs/"' in text
    page = client.get("/teams/nlp/jobs/new/batch/")
    assert page.status_code == 403
    text = page.content.decode()
    assert "Not allowed" in text and "Viewers cannot submit jobs." in text
