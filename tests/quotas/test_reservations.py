"""Advance reservations: the capacity invariant at every instant of a window, under the approvals' row locks, and
the worker raising and lowering the quota in the cluster at the window's start and end."""

import threading
from datetime import UTC, datetime, time, timedelta
from unittest import mock

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from portal.errors import Conflict
from quotas import reservations, services
from quotas.models import Quota, QuotaLevel, Reservation
from quotas.tasks import reservation_apply_due_task
from tests.conftest import require_postgresql
from tests.factories import (
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    TeamFactory,
    TeamNamespaceFactory,
)
from tests.kueue_queues import flavor_quota
from tests.quotas.factories import QuotaRequestFactory
from tests.quotas.test_reconcile import KUEUE, get, grant, setup_cluster

DAY = timedelta(days=1)


def team_on(flavor, slug=None):
    team = TeamFactory(**({"slug": slug} if slug else {}))
    TeamNamespaceFactory(team=team, cluster=flavor.cluster)
    return team, MembershipFactory(team=team, role="admin").user


def book(team, user, flavor, units, start, end):
    return reservations.reservation_create(actor=user, team=team, flavor=flavor, units=units, starts_at=start,
                                           ends_at=end, justification="The big pre-training run")


@pytest.fixture
def base():
    return (timezone.now() + 7 * DAY).replace(minute=0, second=0, microsecond=0)


@pytest.mark.django_db
def test_overlap_refused_at_the_instant_it_passes_capacity_touching_accepted(base):
    flavor = GpuFlavorFactory(name="h100", capacity=16)
    a, a_user = team_on(flavor, "ml-research")
    b, b_user = team_on(flavor, "nlp")
    admin = PlatformAdminFactory()
    grant(a, flavor, 4, 0)
    first = book(a, a_user, flavor, 8, base, base + 2 * DAY)  # 4 + 8 = 12 of 16 over days 0-2
    reservations.reservation_approve(actor=admin, reservation=first)
    # Days 1-3 overlap days 1-2 of the first: 12 + 6 = 18 from day 1, refused, naming that instant.
    late = book(b, b_user, flavor, 6, base + DAY, base + 3 * DAY)
    with pytest.raises(ValidationError, match=f"At {base + DAY:%Y-%m-%d %H:%M} UTC the teams would be guaranteed "
                                              "18 h100 units.*at most 4 can be booked"):
        reservations.reservation_approve(actor=admin, reservation=late)
    # Starting the instant the first ends: they never hold units at the same instant. 4 + 12 = 16 fits.
    touching = book(b, b_user, flavor, 12, base + 2 * DAY, base + 3 * DAY)
    assert reservations.reservation_approve(actor=admin, reservation=touching).state == "booked"
    # And a grant that fits now but not beside the bookings is refused too.
    request = QuotaRequestFactory(team=b, flavor=flavor, guaranteed=2, burst=0)
    with pytest.raises(ValidationError, match=f"From {base + 2 * DAY:%Y-%m-%d %H:%M} UTC.*18 h100 units"):
        services.quota_request_approve(actor=admin, request=request)
    # A time-boxed grant that ends before the bookings start fits.
    boxed = QuotaRequestFactory(team=b, flavor=flavor, guaranteed=12, burst=0, ends_at=base)
    services.quota_request_approve(actor=admin, request=boxed)


@pytest.mark.django_db
def test_cancel_before_the_start_only(base):
    flavor = GpuFlavorFactory(capacity=16)
    team, user = team_on(flavor)
    booked = book(team, user, flavor, 4, base, base + DAY)
    reservations.reservation_approve(actor=PlatformAdminFactory(), reservation=booked)
    outsider = MembershipFactory(team=TeamFactory(), role="admin").user
    with pytest.raises(PermissionDenied):
        reservations.reservation_cancel(actor=outsider, reservation=booked)
    assert reservations.reservation_cancel(actor=user, reservation=booked).state == "cancelled"
    started = book(team, user, flavor, 4, base, base + DAY)
    reservations.reservation_approve(actor=PlatformAdminFactory(), reservation=started)
    with mock.patch("django.utils.timezone.now", return_value=base + timedelta(minutes=1)):
        reservation_apply_due_task.apply()
        with pytest.raises(Conflict):
            reservations.reservation_cancel(actor=user, reservation=started)


@pytest.mark.django_db
def test_the_worker_starts_and_ends_it_in_the_cluster(sandbox, django_capture_on_commit_callbacks, base):
    cluster, team, row, h100, mig = setup_cluster(sandbox.url, "kueue")
    with django_capture_on_commit_callbacks(execute=True):
        grant(team, h100, 2, 1)
    admin = MembershipFactory(team=team, role="admin").user
    booked = book(team, admin, h100, 6, base, base + 2 * DAY)
    reservations.reservation_approve(actor=PlatformAdminFactory(), reservation=booked)

    def nominal():
        queue = get(cluster, KUEUE, "ClusterQueue", "nlp")
        return flavor_quota(queue, "h100", "nvidia.com/gpu")["nominalQuota"]

    assert nominal() == "2"
    mail.outbox.clear()
    for moment, expected, state in [(base - timedelta(minutes=1), "2", "booked"), (base, "8", "active"),
                                    (base + DAY, "8", "active"), (base + 2 * DAY, "2", "ended")]:
        with (mock.patch("django.utils.timezone.now", return_value=moment),
              django_capture_on_commit_callbacks(execute=True)):
            reservation_apply_due_task.apply()
        booked.refresh_from_db()
        assert (nominal(), booked.state) == (expected, state), moment
    quota = Quota.objects.get(team=team, flavor=h100)
    assert (quota.guaranteed, quota.burst, quota.expires_at) == (2, 1, None)  # exactly what it held before
    assert [lvl.guaranteed for lvl in QuotaLevel.objects.filter(team=team, flavor=h100).order_by("since", "pk")] \
        == [2, 8, 2]
    ends = f"{base + 2 * DAY:%Y-%m-%d}"  # a two-day window is inside the notice period from its start
    assert [m.subject for m in mail.outbox] == [f"Reservation of 6 {h100.name} started",
                                                f"Reservation of 6 {h100.name} ends {ends}",
                                                f"Reservation of 6 {h100.name} ended"]


@pytest.mark.django_db
def test_the_team_is_warned_once_before_an_active_booking_ends(base, settings, django_capture_on_commit_callbacks):
    settings.QUOTA_EXPIRY_NOTICE_DAYS = 3
    flavor = GpuFlavorFactory(capacity=32)
    team, admin = team_on(flavor)
    MembershipFactory(team=team, role="member")  # members are not mailed, as for a time-boxed grant
    booked = book(team, admin, flavor, 4, base, base + 10 * DAY)
    reservations.reservation_approve(actor=PlatformAdminFactory(), reservation=booked)
    mail.outbox.clear()
    ticks = [base, base + 7 * DAY - timedelta(minutes=1), base + 7 * DAY, base + 7 * DAY + timedelta(minutes=1),
             base + 9 * DAY]
    with django_capture_on_commit_callbacks(execute=True):
        warned = [reservations.reservation_apply_due(now=moment)["warned"] for moment in ticks]
    assert warned == [0, 0, 1, 0, 0]
    notice = [m for m in mail.outbox if " ends " in m.subject]
    assert len(notice) == 1 and notice[0].to == [admin.email]
    assert notice[0].subject == f"Reservation of 4 {flavor.name} ends {base + 10 * DAY:%Y-%m-%d}"
    assert f"#{booked.pk}" in notice[0].body and "4 guaranteed" in notice[0].body
    booked.refresh_from_db()
    assert booked.end_notice_sent_at == base + 7 * DAY
    cancelled = book(team, admin, flavor, 1, base + 20 * DAY, base + 21 * DAY)  # booked, never active: no notice
    reservations.reservation_approve(actor=PlatformAdminFactory(), reservation=cancelled)
    reservations.reservation_cancel(actor=admin, reservation=cancelled)
    assert reservations.reservation_apply_due(now=base + 20 * DAY + timedelta(hours=1))["warned"] == 0


@pytest.mark.django_db
def test_a_time_box_running_beside_it_reverts_to_what_it_held(base):
    flavor = GpuFlavorFactory(capacity=32)
    team, user = team_on(flavor)
    grant(team, flavor, 2, 0)
    boxed = QuotaRequestFactory(team=team, flavor=flavor, guaranteed=10, burst=0, ends_at=base + 3 * DAY)
    services.quota_request_approve(actor=PlatformAdminFactory(), request=boxed)
    booked = book(team, user, flavor, 4, base, base + 5 * DAY)
    reservations.reservation_approve(actor=PlatformAdminFactory(), reservation=booked)
    reservations.reservation_apply_due(now=base)
    assert Quota.objects.get(team=team).guaranteed == 14
    with mock.patch("django.utils.timezone.now", return_value=base + 3 * DAY):
        services.quota_expire_due()
    assert Quota.objects.get(team=team).guaranteed == 6  # the box's 2 plus the booking's 4
    reservations.reservation_apply_due(now=base + 5 * DAY)
    assert Quota.objects.get(team=team).guaranteed == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_approvals_never_over_commit_any_instant(base):
    require_postgresql()
    flavor = GpuFlavorFactory(capacity=16)
    booked = []
    # Six windows over three days, each of 6 units; any two that overlap would make 12, any three 18.
    for n in range(6):
        team, user = team_on(flavor)
        booked.append(book(team, user, flavor, 6, base + (n % 3) * DAY, base + (n % 3 + 2) * DAY))
    admins = [PlatformAdminFactory() for _ in booked]
    barrier = threading.Barrier(len(booked))
    outcomes = []

    def approve(reservation, admin):
        try:
            barrier.wait()
            reservations.reservation_approve(actor=admin, reservation=reservation)
            outcomes.append("booked")
        except ValidationError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=pair) for pair in zip(booked, admins, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(outcomes) == 6 and "booked" in outcomes and "refused" in outcomes
    windows = list(Reservation.objects.filter(state="booked").values_list("starts_at", "ends_at", "units"))
    for hour in range(0, 5 * 24):
        moment = base + timedelta(hours=hour)
        assert sum(u for s, e, u in windows if s <= moment < e) <= 16, moment


@pytest.mark.django_db
def test_the_calendar_stacks_teams_against_capacity_and_hides_others_from_teams():
    base = datetime.combine((timezone.now() + 7 * DAY).date(), time.min, tzinfo=UTC)  # a midnight
    flavor = GpuFlavorFactory(name="h100", capacity=16)
    a, a_user = team_on(flavor, "ml-research")
    b, b_user = team_on(flavor, "nlp")
    grant(a, flavor, 4, 0)
    grant(b, flavor, 2, 0)
    booked = book(b, b_user, flavor, 8, base + DAY + timedelta(hours=6), base + 2 * DAY)
    reservations.reservation_approve(actor=PlatformAdminFactory(), reservation=booked)
    now = base - timedelta(hours=1)
    calendar = selectors_calendar(PlatformAdminFactory(), flavor, now)
    assert calendar.allowed == 16 and calendar.teams == ["ml-research", "nlp"]
    days = {d.day: d for d in calendar.days}
    booked_day = (base + DAY).date()
    assert (days[booked_day].by_team, days[booked_day].total, days[booked_day].free) == (
        {"ml-research": 4, "nlp": 10}, 14, 2)
    assert (days[base.date()].total, days[base.date()].free) == (6, 10)
    mine = selectors_calendar(a_user, flavor, now)
    assert mine.teams == ["ml-research", "other teams"]
    assert {d.day: d for d in mine.days}[booked_day].free == 2  # the free capacity is everyone's to see
    assert {d.day: d for d in mine.days}[booked_day].cells == [4, 10]


def selectors_calendar(user, flavor, now):
    from quotas.selectors import capacity_calendar

    return capacity_calendar(user=user, flavor=flavor, now=now, days=14)


@pytest.mark.django_db
def test_pages_book_decide_and_show_the_calendar(client, base):
    flavor = GpuFlavorFactory(name="h100", capacity=16)
    team, user = team_on(flavor, "ml-research")
    client.force_login(user)
    form = client.get(reverse("quotas:reservation-create", args=[team.slug]))
    assert form.status_code == 200 and 'calendar-table' in form.content.decode()
    asked = client.post(reverse("quotas:reservation-create", args=[team.slug]), {
        "flavor": flavor.pk, "units": 20, "starts_at": f"{base:%Y-%m-%dT%H:%M}",
        "ends_at": f"{base + DAY:%Y-%m-%dT%H:%M}", "justification": "The big pre-training run"})
    assert asked.status_code == 400 and "exceed the whole h100 capacity" in asked.content.decode()
    client.post(reverse("quotas:reservation-create", args=[team.slug]), {
        "flavor": flavor.pk, "units": 6, "starts_at": f"{base:%Y-%m-%dT%H:%M}",
        "ends_at": f"{base + DAY:%Y-%m-%dT%H:%M}", "justification": "The big pre-training run"})
    reservation = Reservation.objects.get(team=team)
    client.force_login(PlatformAdminFactory())
    queue = client.get(reverse("quotas:reservation-approvals")).content.decode()
    assert f'id="reservation-{reservation.pk}"' in queue
    client.post(reverse("quotas:reservation-decide", args=[reservation.pk, "approve"]))
    reservation.refresh_from_db()
    assert reservation.state == "booked"
    calendar = client.get(reverse("quotas:calendar", args=[flavor.pk])).content.decode()
    assert f'data-day="{base:%Y-%m-%d}" data-free="10"' in calendar
