"""The console's health page: the broker and each cluster, how far reconcile and each watcher are behind, and the
workers' failed tasks, for the platform team; the same facts `/metrics` exports, drawn in a constant number of
queries whatever the number of teams."""

import re
import socket

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from portal import metrics
from tests.factories import (
    ClusterFactory,
    MembershipFactory,
    PlatformAdminFactory,
    TeamFactory,
    TeamNamespaceFactory,
)

pytestmark = pytest.mark.django_db
URL = "/console/health/"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def row(body: str, cluster: str) -> str:
    match = re.search(rf'<tr data-cluster="{cluster}">(.*?)</tr>', body, re.S)
    assert match, f"no row for {cluster}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(1))).strip()


def test_the_platform_team_sees_what_waits_and_what_does_not_answer(client):
    east = ClusterFactory(name="east", server=f"http://127.0.0.1:{_closed_port()}", generation=2,
                          observed_generation=1)
    TeamNamespaceFactory(team=TeamFactory(slug="nlp"), cluster=east, generation=3, observed_generation=2,
                         attempts=2, next_attempt_at="2030-01-01T00:00:00Z")
    TeamNamespaceFactory(team=TeamFactory(slug="cv"), cluster=east, generation=1, observed_generation=1)
    ClusterFactory(name="idle", active=False)
    metrics.watcher_flushed("east")
    metrics.task_outcome("jobs.tasks.job_reconcile_task", "failed")
    client.force_login(PlatformAdminFactory())
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{_closed_port()}/0"):
        away = client.get(URL)
    assert away.status_code == 200
    body = away.content.decode()
    assert 'data-cluster="idle"' not in body  # an inactive cluster is not watched or reconciled
    # The cluster (2 rows behind: a team namespace and its own objects), one retrying after 2 failed attempts.
    assert re.match(r"east does not answer .+ 2 1 \(2 failed attempts\) 0 unknown \(the broker does not answer\)$",
                    row(body, "east")), row(body, "east")
    assert "does not answer" in re.search(r'id="broker-state">(.*?)</p>', body, re.S).group(1)
    assert "the due sweep sends them once the broker is back" in body
    assert "The broker does not answer, so the workers' counts cannot be read." in body
    assert "2 problems below." in body  # the broker, and the cluster (its API server, its retrying row)


def test_a_healthy_system_says_so_and_lists_failed_tasks(client, sandbox):
    cluster = ClusterFactory(name="west", server=sandbox.url, generation=1, observed_generation=1)
    TeamNamespaceFactory(team=TeamFactory(slug="nlp"), cluster=cluster, generation=1, observed_generation=1)
    metrics.watcher_flushed("west")
    metrics.task_outcome("tenants.tasks.send_email_task", "failed")
    client.force_login(PlatformAdminFactory())
    body = client.get(URL).content.decode()
    assert re.match(r"west answers 0 0 0 \d+ s ago$", row(body, "west")), row(body, "west")
    assert "tenants.tasks.send_email_task</code>: " in body
    assert "healthy</span> The broker and every cluster answer; nothing waits for a retry." in body


def test_a_watcher_that_never_wrote_is_flagged(client, sandbox):
    ClusterFactory(name="silent-watcher", server=sandbox.url, generation=1, observed_generation=1)
    client.force_login(PlatformAdminFactory())
    body = client.get(URL).content.decode()
    assert row(body, "silent-watcher").endswith("never")
    assert re.search(r'<td class="num bad">never</td>', body)
    assert "1 problem below." in body


def test_only_platform_admins_and_queries_do_not_grow_with_teams(client, sandbox):
    cluster = ClusterFactory(name="east", server=sandbox.url)
    member = MembershipFactory(team=TeamFactory(slug="nlp"), role="admin").user
    client.force_login(member)
    assert client.get(URL).status_code == 403
    admin = PlatformAdminFactory()
    client.force_login(admin)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(URL).status_code == 200
        return len(captured)

    TeamNamespaceFactory(team=TeamFactory(slug="a"), cluster=cluster)
    few = queries()
    for n in range(20):
        TeamNamespaceFactory(team=TeamFactory(slug=f"t{n}"), cluster=cluster, generation=2, observed_generation=1)
    assert queries() == few
