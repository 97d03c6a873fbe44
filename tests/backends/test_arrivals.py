"""Jobs expected to be submitted later, from the cluster's recent submissions, and how the forecast allows for them
(pure: no database, no clock)."""

import gc
import time
from dataclasses import replace

import pytest

from backends import arrivals
from backends.arrivals import Submitted, expected, gamma_quantile
from backends.forecast import EARLY, LATE, LIKELY, forecast
from backends.kueue_forecast import KueuePolicy
from backends.volcano_forecast import VolcanoPolicy

from .test_forecast import NOW, running, starts, two_teams, waiting

HOUR = 3600.0
POLICIES = {"kueue": KueuePolicy, "volcano": VolcanoPolicy}


def stream(queue="a", *, every=HOUR, hours=24, units=8, priority=10, seconds=1800.0, may_preempt=False):
    """A steady stream of submissions over the last `hours`."""
    return [Submitted(NOW - i * every, queue, "h100", units, priority, seconds, may_preempt=may_preempt)
            for i in range(1, int(hours * HOUR / every) + 1)]


def test_no_history_means_no_arrivals_and_the_same_estimates():
    assert not expected([], NOW)
    assert expected([], NOW).replays == ((), (), ())
    assert not expected(stream(hours=24)[:4], NOW)  # fewer submissions than say anything of a rate
    assert not expected(stream(every=60, hours=0.5), NOW)  # half an hour of history says nothing either
    works = [running(1, "a", 8, ends_in=600), waiting(2, "a", 8, 600)]
    without = forecast(two_teams(), works, KueuePolicy(), NOW)
    assert forecast(two_teams(), works, KueuePolicy(), NOW, expected([], NOW).replays) == without


def within_two_days(per_hour: float) -> int:
    """How many arrivals of a rate come within the horizon, each at its likely quantile."""
    return sum(1 for k in range(1, 1000) if gamma_quantile(k, arrivals.LIKELY_Z) / per_hour <= 48)


def test_a_steady_stream_is_replayed_at_its_rate_with_what_it_asked_for():
    outlook = expected(stream(every=HOUR, hours=24), NOW)
    likely = outlook.replays[LIKELY]
    assert outlook.submitted == 24 and outlook.observed == 24 * HOUR
    assert 48 <= len(likely) == within_two_days(1.0) < 56  # one an hour over the next two days
    assert all(w.arrives > NOW and w.units == 8 and w.priority == 10 and w.span.likely == 1800 for w in likely)
    assert [w.arrives for w in likely[:3]] == [NOW + gamma_quantile(k, arrivals.LIKELY_Z) * HOUR for k in (1, 2, 3)]
    gaps = [b.arrives - a.arrives for a, b in zip(likely, likely[1:], strict=False)]
    assert gaps == sorted(gaps) and 0.9 * HOUR < gaps[-1] <= HOUR  # towards one an hour in the long run
    # the late replay expects them earlier (more work ahead), the early one later
    assert outlook.replays[LATE][0].arrives < likely[0].arrives < outlook.replays[EARLY][0].arrives
    assert len(outlook.replays[LATE]) > len(likely) > len(outlook.replays[EARLY])


def test_the_rate_counts_only_the_window_and_the_clusters_life():
    past = stream(every=HOUR, hours=24 * 10)  # ten days of one an hour
    assert len(expected(past, NOW).replays[LIKELY]) == within_two_days(1.0)  # the last week's rate
    quiet_day_before = expected(stream(hours=24), NOW, since=NOW - 48 * HOUR)
    assert len(quiet_day_before.replays[LIKELY]) == within_two_days(0.5)


def test_the_gamma_quantiles_are_those_of_the_kth_arrival():
    assert gamma_quantile(1, 0.0) == pytest.approx(0.693, rel=0.03)  # the exponential's median
    assert gamma_quantile(1, -1.2816) == pytest.approx(0.105, rel=0.08)
    assert gamma_quantile(1, 1.2816) == pytest.approx(2.303, rel=0.03)
    assert gamma_quantile(100, 0.0) == pytest.approx(99.67, rel=0.01)


@pytest.mark.parametrize("backend", POLICIES)
def test_a_steady_high_priority_stream_delays_a_low_priority_jobs_likely_start(backend):
    # Team a holds 8 GPUs: a low-priority job waits for the running one; a high-priority job an hour, each running
    # half an hour, is submitted to the same queue, and each that arrives while it waits goes first.
    works = [running(1, "a", 8, ends_in=1.5 * HOUR), waiting(2, "a", 8, 1800)]
    world = two_teams(a=(8, 0), b=(8, 0), cohort="")
    without = forecast(world, works, POLICIES[backend](), NOW)
    outlook = expected(stream("a", every=HOUR, hours=24), NOW)
    allowing = forecast(world, works, POLICIES[backend](), NOW, outlook.replays)
    assert starts(without, 2) == [1.5 * HOUR]
    assert starts(allowing, 2)[0] > 1.5 * HOUR + 1800  # at least one arrival runs first
    assert allowing[2].later >= 1 and allowing[2].later_higher == allowing[2].later
    assert allowing[2].start[2] >= allowing[2].start[1] >= allowing[2].start[0]
    assert set(allowing) == {1, 2}  # the expected arrivals get no estimate of their own


@pytest.mark.parametrize("backend", POLICIES)
def test_arrivals_of_a_lower_priority_or_another_flavor_do_not_delay_it(backend):
    works = [running(1, "a", 8, ends_in=1.5 * HOUR, priority=10), waiting(2, "a", 8, 1800, priority=10)]
    world = two_teams(a=(8, 0), b=(8, 0), cohort="")
    world.queues["b"].nominal["a100"] = 8
    world.capacity["a100"] = 8
    past = stream("a", priority=0) + [replace(s, flavor="a100") for s in stream("b", priority=100)]
    result = forecast(world, works, POLICIES[backend](), NOW, expected(past, NOW).replays)
    assert starts(result, 2) == [1.5 * HOUR]
    assert result[2].later == 0


@pytest.mark.parametrize("backend", POLICIES)
def test_a_job_that_can_start_now_is_not_delayed_by_arrivals(backend):
    works = [waiting(2, "a", 4, 1800)]
    result = forecast(two_teams(), works, POLICIES[backend](), NOW, expected(stream("a"), NOW).replays)
    assert starts(result, 2) == [0]


def test_the_arrivals_are_bounded_and_cheap():
    past = [Submitted(NOW - i * 10.0, f"t{i % 8}", "h100", 1 + i % 8, (0, 10)[i % 2], 600.0) for i in range(50_000)]
    gc.collect()  # the garbage earlier tests left is not this code's cost
    started = time.process_time()
    outlook = expected(past, NOW)
    spent = time.process_time() - started
    assert all(len(replay) <= arrivals.MAX_ARRIVALS for replay in outlook.replays)
    assert len(outlook.replays[LIKELY]) > arrivals.MAX_ARRIVALS * 0.8
    assert spent < 0.5, f"{spent:.2f} s of CPU"
