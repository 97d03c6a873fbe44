"""The quota request form shows what the team holds and what waits, labels in words, and refuses a second pending
request for the same flavor beside the field, keeping what was typed."""

import html
import re

import pytest
from django.test import Client

from quotas.models import Quota
from quotas.services import quota_request_create
from tenants.choices import Role
from tests.factories import ClusterFactory, GpuFlavorFactory, MembershipFactory, TeamFactory, TeamNamespaceFactory

pytestmark = pytest.mark.django_db
URL = "/teams/nlp/quota/request/"


def text(response) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode())))


@pytest.fixture
def world():
    cluster = ClusterFactory(name="east")
    h100 = GpuFlavorFactory(cluster=cluster, name="h100", capacity=64)
    l40s = GpuFlavorFactory(cluster=cluster, name="l40s", capacity=16)
    team = TeamFactory(slug="nlp")
    TeamNamespaceFactory(team=team, cluster=cluster)
    Quota.objects.create(team=team, flavor=h100, guaranteed=8, burst=4, cpu_cores=64, memory_gib=512)
    member = MembershipFactory(team=team, role=Role.MEMBER).user
    client = Client()
    client.force_login(member)
    return {"h100": h100, "l40s": l40s, "team": team, "member": member, "client": client}


def test_the_form_shows_holdings_and_refuses_a_second_pending_request(world):
    page = text(world["client"].get(URL))
    assert "What the team holds now" in page and "east h100 8 4 64 512" in page
    assert "CPU cores" in page and "Memory (GiB)" in page and "Cpu cores" not in page
    assert "east · h100 (nvidia.com/gpu): holds 8 + 4" in page and "l40s (nvidia.com/gpu): holds none" in page

    first = quota_request_create(actor=world["member"], team=world["team"], flavor=world["h100"], guaranteed=16,
                                 burst=4, justification="Pre-training for two weeks")
    page = text(world["client"].get(URL))
    assert f"Waiting for a decision: #{first.pk} east · h100 (16 + 4)" in page
    again = world["client"].post(URL, {"flavor": world["h100"].pk, "guaranteed": 20, "burst": 0,
                                       "justification": "Even more for the same run"})
    body = again.content.decode()
    assert again.status_code == 400 and 'id="id_flavor-error"' in body
    assert f"Request #{first.pk} for h100 in east is still pending" in text(again)
    assert "Even more for the same run" in body and 'value="20"' in body
    other = world["client"].post(URL, {"flavor": world["l40s"].pk, "guaranteed": 2, "burst": 0,
                                       "justification": "Inference benchmarks"})
    assert other.status_code == 302  # another flavor is another question


def test_the_form_shows_the_capacity_calendar_of_the_flavor_asked_about(world):
    """A team asking for a total sees when there is room: the calendar of the flavor it picks, posts or renews."""
    first = world["client"].get(URL)
    assert first.status_code == 200 and f'id="calendar-{world["h100"].pk}"' in first.content.decode()
    assert "When there is room" in text(first) and "east · h100: 64 units may be guaranteed" in text(first)
    picked = world["client"].get(URL, {"flavor": world["l40s"].pk})
    assert f'id="calendar-{world["l40s"].pk}"' in picked.content.decode()
    refused = world["client"].post(URL, {"flavor": world["l40s"].pk, "guaranteed": 0, "burst": 0,
                                         "justification": "x"})
    assert refused.status_code == 400 and f'id="calendar-{world["l40s"].pk}"' in refused.content.decode()
    days = re.findall(r'data-free="(\d+)"', first.content.decode())
    assert days and set(days) == {"56"}  # 64 allowed, 8 guaranteed to nlp on every day ahead
    other = TeamFactory(slug="cv")  # another team's flavor is not offered, so its calendar is not shown
    foreign = GpuFlavorFactory(cluster=ClusterFactory(name="west"), name="a100", capacity=8)
    TeamNamespaceFactory(team=other, cluster=foreign.cluster)
    assert f'id="calendar-{foreign.pk}"' not in world["client"].get(URL, {"flavor": foreign.pk}).content.decode()
