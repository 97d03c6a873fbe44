"""The fair-sharing "what if" panel: recorded usage replayed through Kueue's admission fair sharing with other weights
or half-lives (hand-computed figures), platform admins only, a validated form, and a query count that does not grow
with the data; and the capacity page's decayed usage beside each weight, with its warning when the half-life is 0."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from backends import kueue_fairshare as afs
from billing import fair_sharing
from quotas.models import Quota
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UsageHourFactory,
)
from tests.permissions import request_as

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)
END = NOW.replace(minute=0)


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)  # the pages replay the weeks before NOW
    cluster = ClusterFactory(name="gpu-east")
    flavor = GpuFlavorFactory(cluster=cluster, name="h100")
    teams = {slug: TeamFactory(slug=slug, name=slug.title()) for slug in ("nlp", "vision")}
    for team in teams.values():
        TeamNamespaceFactory(team=team, cluster=cluster)
    return cluster, flavor, teams


def usage(flavor, team, hours_ago: int, units: float):
    UsageHourFactory(team=team, flavor=flavor, hour=END - timedelta(hours=hours_ago), allocated_gpu_hours=units,
                     used_gpu_hours=0)


def test_what_if_by_hand(world):
    """nlp held 8 GPUs two hours ago, vision 2 in the last hour. Half-life 1 h, sampled every 30 min: nlp ends at
    8 × (1 − 0.5) × 0.5 = 2, vision at 2 × 0.5 = 1. With today's weights vision goes first (1 < 2); with nlp's
    weight 4 nlp does (0.5 < 1). Today's half-life of 0 remembers nothing: both 0, by name."""
    cluster, flavor, teams = world
    usage(flavor, teams["nlp"], 2, 8)
    usage(flavor, teams["vision"], 1, 2)
    hour = afs.Settings(half_life=3600, sampling=1800)
    result = fair_sharing.what_if(cluster=cluster, weights={"nlp": 4}, settings=hour,
                                  baseline=afs.Settings(sampling=1800), weeks=1, now=NOW)
    rows = {row.slug: row for row in result.teams}
    assert rows["nlp"].consumed == pytest.approx(2.0) and rows["vision"].consumed == pytest.approx(1.0)
    assert (rows["nlp"].usage, rows["vision"].usage) == pytest.approx((0.5, 1.0))
    assert (rows["nlp"].share, rows["vision"].share) == pytest.approx((1 / 3, 2 / 3))
    assert [row.slug for row in result.teams] == ["nlp", "vision"]
    assert (rows["nlp"].consumed_now, rows["nlp"].place_now, rows["vision"].place_now) == (0, 1, 2)
    assert result.recorded_hours == 2
    today = fair_sharing.what_if(cluster=cluster, weights={}, settings=hour, baseline=hour, weeks=1, now=NOW)
    assert [row.slug for row in today.teams] == ["vision", "nlp"]
    assert today.teams[0].moved == 0


def url(cluster, **params):
    base = reverse("billing:fair-sharing-what-if", args=[cluster.name])
    return base + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def test_only_platform_admins_see_the_panel(client, world):
    cluster, _, teams = world
    member = MembershipFactory(team=teams["nlp"], role="admin").user
    assert request_as(client, member, url(cluster)).status_code == 403
    assert request_as(client, None, url(cluster)).status_code == 302
    assert request_as(client, PlatformAdminFactory(), url(cluster)).status_code == 200
    volcano = ClusterFactory(name="gpu-west", scheduler="volcano")
    assert request_as(client, PlatformAdminFactory(), url(volcano)).status_code == 404


FORM = {"weeks": "2", "half_life": "2h", "baseline_half_life": "0s", "sampling": "5m", "weight_nlp": "1",
        "weight_vision": "3"}


@pytest.mark.parametrize(("field", "value", "error"), [
    ("half_life", "a week", "not a duration"),
    ("half_life", "-1h", "must be between 0s and 8760h"),
    ("sampling", "0s", "must be between 1s and 24h"),
    ("weight_nlp", "0", "greater than or equal to 1"),
    ("weight_vision", "x", "Enter a whole number"),
    ("weeks", "9", "less than or equal to 8"),
])
def test_bad_input_gets_a_clear_error(client, world, field, value, error):
    cluster, _, _ = world
    response = request_as(client, PlatformAdminFactory(), url(cluster, **{**FORM, field: value}))
    assert response.status_code == 400
    assert error in response.content.decode()
    assert 'id="what-if-table"' not in response.content.decode()


def test_the_panel_shows_order_share_and_a_chart(client, world):
    cluster, flavor, teams = world
    usage(flavor, teams["nlp"], 3, 8)
    usage(flavor, teams["vision"], 1, 3)
    response = request_as(client, PlatformAdminFactory(), url(cluster, **FORM))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="fair-sharing-chart"' in body and "Usage ÷ weight by hour" in body
    # Half-life 2 h: an hour of holding keeps 1 − 0.5^0.5 ≈ 0.2929 of it. nlp: 8 × 0.2929 ≈ 2.343, halved over the
    # two hours since → 1.17 (weight 1); vision: 3 × 0.2929 ≈ 0.879, ÷ its weight 3 → 0.29, so vision goes first.
    # Today (half-life 0) both have nothing and keep the ClusterQueue's order: nlp, vision.
    vision_row = body.split('data-team="vision"')[1].split("</tr>")[0]
    assert '<td class="num place">1 <span class="good">↑1</span>' in vision_row
    assert '<td class="num usage">0.29</td>' in vision_row
    nlp_row = body.split('data-team="nlp"')[1].split("</tr>")[0]
    assert '<td class="num usage">1.17</td>' in nlp_row and '<span class="bad">↓1</span>' in nlp_row


def test_queries_do_not_grow_with_the_data(client, world, django_assert_max_num_queries):
    cluster, flavor, teams = world
    admin = PlatformAdminFactory()
    client.force_login(admin)
    client.get(url(cluster, **FORM))  # warm the session
    with django_assert_max_num_queries(9) as small:
        assert client.get(url(cluster, **FORM)).status_code == 200
    for index in range(6):
        team = TeamFactory(slug=f"team-{index}")
        TeamNamespaceFactory(team=team, cluster=cluster)
        for hours_ago in range(1, 49):
            usage(flavor, team, hours_ago, index + 1)
    with django_assert_max_num_queries(len(small.captured_queries)):
        response = client.get(url(cluster, **FORM))
    assert response.status_code == 200 and response.content.decode().count("<tr data-team=") == 8


# --- the capacity page --------------------------------------------------------------------------------------


def _holding(cluster, flavor, team, in_use: int, decayed: dict | None):
    Quota.objects.create(team=team, flavor=flavor, guaranteed=4, burst=0)
    status = {"flavors": {flavor.name: {"nvidia.com/gpu": in_use}}}
    if decayed is not None:
        status["decayed"] = decayed
    team.namespaces.filter(cluster=cluster).update(quota_status=status)


@pytest.mark.parametrize(("decayed", "in_use", "warned", "shown"), [
    ({"consumed": {"nvidia.com/gpu": 2.5}, "updated": "2026-11-20T12:00:00Z"}, 2, False, "2.50"),
    ({"consumed": {}, "updated": "2026-11-20T12:00:00Z"}, 2, True, "0.00"),  # holds GPUs, nothing remembered
    ({"consumed": {}, "updated": "2026-11-20T12:00:00Z"}, 0, False, "0.00"),  # cannot be told yet
    (None, 2, False, "—"),  # Kueue's Configuration has no admissionFairSharing
])
def test_capacity_page_shows_decayed_usage_and_warns_of_a_zero_half_life(client, world, decayed, in_use, warned,
                                                                         shown):
    cluster, flavor, teams = world
    _holding(cluster, flavor, teams["nlp"], in_use, decayed)
    body = request_as(client, PlatformAdminFactory(), reverse("quotas:capacity")).content.decode()
    assert ("remembers nothing" in body) is warned
    row = body.split('data-team="nlp"')[1].split("</tr>")[0]
    assert f'<td class="num decayed">{shown}' in row or (shown != "—" and f">{shown}</span>" in row)
    assert url(cluster) in body


# --- the API -----------------------------------------------------------------------------------------------------


def api_url(cluster, **params):
    base = reverse("api:fair-sharing-what-if", args=[cluster.name])
    return base + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def test_the_api_gives_the_same_figures(client, world):
    cluster, flavor, teams = world
    usage(flavor, teams["nlp"], 3, 8)
    usage(flavor, teams["vision"], 1, 3)
    response = request_as(client, PlatformAdminFactory(), api_url(cluster, **FORM))
    assert response.status_code == 200
    body = response.json()
    assert [t["team"] for t in body["teams"]] == ["vision", "nlp"]
    vision = body["teams"][0]
    assert (vision["place"], vision["place_today"], vision["weight"], vision["weight_today"]) == (1, 2, 3, 1)
    assert vision["usage_per_weight"] == pytest.approx(3 * (1 - 0.5 ** 0.5) / 3)
    assert body["recorded_hours"] == 2 and body["end"] == "2026-11-20T12:00:00Z"
    defaults = request_as(client, PlatformAdminFactory(), api_url(cluster)).json()  # 168h against 0s, 4 weeks
    assert defaults["start"] == "2026-10-23T12:00:00Z"


def test_the_api_refuses_bad_input_and_other_users(client, world):
    cluster, _, teams = world
    bad = request_as(client, PlatformAdminFactory(), api_url(cluster, half_life="soon", weight_nlp="0"))
    assert bad.status_code == 400
    fields = bad.json()["error"]["fields"]
    assert "not a duration" in fields["half_life"][0] and "greater than or equal to 1" in fields["weight_nlp"][0]
    member = MembershipFactory(team=teams["nlp"], role="admin").user
    assert request_as(client, member, api_url(cluster)).status_code == 403
    volcano = ClusterFactory(name="gpu-west", scheduler="volcano")
    assert request_as(client, PlatformAdminFactory(), api_url(volcano)).status_code == 404
