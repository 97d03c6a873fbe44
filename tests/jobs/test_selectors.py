"""job_page, the job list's hand-written SELECT, and job_list with filters (the jobs page), against the queryset
they stand in for: the one filter set (jobs.filters.JobFilter) applied by django-filter to job_list, for every
kind of user and a table of filters, walked page by page both ways."""

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.filters import JobFilter
from jobs.models import Job
from jobs.selectors import PAGE_KEYS, job_list, job_page, jobs_due
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    UserFactory,
)

T0 = timezone.now().replace(microsecond=0) - timedelta(days=1)


@pytest.fixture
def jobs_world(db):
    """Three teams over two clusters whose flavors share a name; jobs of every kind and state, many submitted in
    the same second (ties broken by id), some with no start or finish."""
    east, west = ClusterFactory(name="east"), ClusterFactory(name="west")
    flavors = [GpuFlavorFactory(cluster=east, name="h100"), GpuFlavorFactory(cluster=west, name="h100"),
               GpuFlavorFactory(cluster=west, name="a100")]
    tiers = [PriorityTierFactory(name="standard", value=1000), PriorityTierFactory(name="urgent", value=9000)]
    nlp, vision, audio = TeamFactory(slug="nlp"), TeamFactory(slug="vision"), TeamFactory(slug="audio")
    ada, bo, cy = UserFactory(username="ada"), UserFactory(username="bo"), UserFactory(username="cy")
    for user, team in ((ada, nlp), (ada, vision), (bo, vision), (cy, audio)):
        MembershipFactory(user=user, team=team)
    submitters = {nlp: [ada], vision: [ada, bo], audio: [cy]}
    states = ["pending", "queued", "admitted", "running", "succeeded", "failed", "cancelled", "preempted"]
    jobs = []
    for n, (team, kind) in enumerate(list(itertools.product([nlp, vision, audio], ["pytorch", "ray", "batch"])) * 4):
        started = T0 + timedelta(minutes=n // 3) if n % 4 else None
        jobs.append(Job(team=team, cluster=flavors[n % 3].cluster, flavor=flavors[n % 3], priority_tier=tiers[n % 2],
                        kind=kind, name=f"run-{n}", image="ghcr.io/acme/train:1", command=["python"],
                        workers=1 + n % 3, gpus_per_worker=1 + n % 2, state=states[n % len(states)],
                        state_message=f"message {n}", submitted_by=submitters[team][n % len(submitters[team])],
                        submitted_at=T0 + timedelta(seconds=n // 3), admitted_at=started, started_at=started,
                        finished_at=started + timedelta(seconds=n) if started and n % 2 else None))
    Job.objects.bulk_create(jobs)
    return {"platform admin": PlatformAdminFactory(), "in two teams": ada, "in one team": bo, "in another team": cy,
            "in no team": UserFactory(username="dee")}


FILTERS = [
    {},
    {"team": "vision"},
    {"team": "audio"},
    {"state": "running"},
    {"kind": "ray"},
    {"user": "bo"},
    {"flavor": "h100"},
    {"cluster": "west"},
    {"flavor": "h100", "cluster": "west", "kind": "batch"},
    {"submitted_after": (T0 + timedelta(seconds=5)).isoformat()},
    {"submitted_before": (T0 + timedelta(seconds=7)).isoformat(), "state": "queued"},
    {"team": "nobody"},
]


def _reference(user, data: dict) -> tuple[list[dict], dict]:
    """What the list was before job_page: the filter set applied to job_list; and the filters job_page takes."""
    filterset = JobFilter(data=data, queryset=job_list(user=user))
    assert filterset.is_valid(), filterset.errors
    filters = {name: value for name, value in filterset.form.cleaned_data.items() if value not in (None, "")}
    return list(filterset.qs.values(*PAGE_KEYS)), filters


def _walk(user, filters: dict, *, size: int, reverse: bool) -> list[dict]:
    """Every row, a page at a time, each page starting after the last row of the one before."""
    rows, position = [], None
    while True:
        page = job_page(user=user, filters=filters, position=position, reverse=reverse, limit=size)
        rows += page
        if len(page) < size:
            return rows
        position = (page[-1]["submitted_at"], page[-1]["id"])


@pytest.mark.parametrize("who", ["platform admin", "in two teams", "in one team", "in another team", "in no team"])
@pytest.mark.parametrize("data", FILTERS, ids=lambda d: ",".join(d) or "none")
def test_job_page_reads_what_the_filtered_job_list_holds(jobs_world, who, data):
    user = jobs_world[who]
    expected, filters = _reference(user, data)
    if who == "platform admin" and not data:
        assert len(expected) == 36  # the world holds the jobs the other cases pick from
    assert job_page(user=user, filters=filters, limit=1000) == expected
    assert list(job_list(user=user, filters=filters).values(*PAGE_KEYS)) == expected  # the page's ORM read
    assert _walk(user, filters, size=5, reverse=False) == expected
    # Going back: the rows before a position, nearest first; walked from the oldest end, the list reversed.
    assert _walk(user, filters, size=4, reverse=True) == expected[::-1]
    if expected:
        oldest = expected[-1]
        assert job_page(user=user, filters=filters, position=(oldest["submitted_at"], oldest["id"]), reverse=True,
                        limit=1000) == expected[-2::-1]


def test_a_user_in_no_team_costs_no_page_query(jobs_world, django_assert_num_queries):
    user = jobs_world["in no team"]
    with django_assert_num_queries(1):  # the memberships; there is nothing to read after that
        assert job_page(user=user, filters={}) == []


def test_jobs_due_are_those_whose_next_attempt_has_come(jobs_world):
    now = timezone.now()
    jobs = list(Job.objects.order_by("pk")[:3])
    for job, at in zip(jobs, [now - timedelta(seconds=1), now + timedelta(minutes=5), None], strict=True):
        Job.objects.filter(pk=job.pk).update(next_attempt_at=at)
    assert jobs_due() == [jobs[0].pk]
    Job.objects.filter(pk=jobs[1].pk).update(next_attempt_at=now - timedelta(minutes=1))
    assert sorted(jobs_due()) == [jobs[0].pk, jobs[1].pk] and jobs_due(limit=1) in ([jobs[0].pk], [jobs[1].pk])
