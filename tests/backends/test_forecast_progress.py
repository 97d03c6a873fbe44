"""A running job's own progress as the evidence for its end (pure: `jobs.runtimes` and the replay): it beats the
history of comparable runs, the limit still caps it, and a report that is stale, from before the current run or a
single early one is not relied on."""

import pytest

from backends.forecast import Queue, Work, World, forecast
from backends.kueue_forecast import KueuePolicy
from backends.volcano_forecast import VolcanoPolicy
from jobs import runtimes

NOW = 1_000_000.0
POLICIES = {"kueue": KueuePolicy, "volcano": VolcanoPolicy}


def usable(done=600, total=1000, reports=2, since_start=3 * 3600.0, age=60.0):
    return runtimes.usable_progress(done=done, total=total, reports=reports, since_start=since_start, age=age)


def test_progress_beats_the_history_of_comparable_runs():
    share = usable()
    span = runtimes.span(limit=24 * 3600, samples=[3600, 3700, 3800], elapsed=3 * 3600, progress=share)
    assert span.evidence == "progress" and span.likely == pytest.approx(5 * 3600)  # 60 % after 3 h: 5 h in all
    assert span.detail == "it is 60 % done after 3 h"
    assert 3 * 3600 < span.early < span.likely < span.late  # the range is on the 2 h left, not on the 3 h done
    assert span.late - span.likely == pytest.approx(0.25 * 2 * 3600)


def test_the_runtime_limit_still_caps_what_progress_projects():
    span = runtimes.span(limit=4 * 3600, elapsed=3 * 3600, progress=usable())
    assert (span.likely, span.late) == (4 * 3600, 4 * 3600) and span.detail.endswith("capped by its runtime limit")


def test_a_finished_report_means_it_ends_now():
    span = runtimes.span(limit=24 * 3600, elapsed=3600, progress=usable(done=1000))
    assert span.early == span.likely == span.late == 3600


@pytest.mark.parametrize("kwargs, relied_on", [
    ({}, True),
    ({"age": runtimes.PROGRESS_STALE_AFTER + 1}, False),  # stale: the job may hang; history or the limit say more
    ({"age": runtimes.PROGRESS_STALE_AFTER}, True),
    ({"since_start": -30.0}, False),  # reported before the current run (it was preempted and started again)
    ({"reports": 1, "done": 10}, False),  # one report of 1 %: start-up still dominates
    ({"reports": 1, "done": 50}, True),  # one report past 5 %
    ({"reports": 2, "done": 10}, True),  # a series, however early
    ({"done": 0}, False),
    ({"total": None, "done": None}, False),
])
def test_which_reports_are_relied_on(kwargs, relied_on):
    assert (usable(**kwargs) is not None) == relied_on


@pytest.mark.parametrize("backend", POLICIES)
def test_a_waiting_job_starts_when_the_progress_of_the_running_one_says_it_ends(backend):
    world = World(queues={"a": Queue("a", "", {"h100": 8}, {})}, capacity={"h100": 8})
    started = NOW - 3 * 3600
    history = runtimes.span(limit=24 * 3600, samples=[10 * 3600] * 5, elapsed=3 * 3600)
    progressed = runtimes.span(limit=24 * 3600, elapsed=3 * 3600, progress=0.6)
    for span, ends in ((history, started + 10 * 3600), (progressed, started + 5 * 3600)):
        works = [Work(1, "a", "h100", 8, 0, (started, 1), span, name="train-42", started=started),
                 Work(2, "a", "h100", 8, 0, (NOW - 10, 2), runtimes.span(limit=3600), name="next")]
        result = forecast(world, works, POLICIES[backend](), NOW)
        assert result[1].end[1] == pytest.approx(ends) and result[2].start[1] == pytest.approx(ends)
