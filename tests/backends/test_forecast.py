"""The forecast's replay of each scheduler (pure: no database, no clock): order, quota, borrowing, preemption,
gangs and topology, and the run-time evidence it is fed."""

import gc
import time
from dataclasses import replace

import pytest

from backends.forecast import Cohort, Holding, Queue, Span, Work, World, forecast
from backends.kueue_forecast import KueuePolicy
from backends.volcano_forecast import VolcanoPolicy
from jobs import runtimes

NOW = 1_000_000.0
POLICIES = {"kueue": KueuePolicy, "volcano": VolcanoPolicy}


def exact(seconds: float) -> Span:
    return Span(seconds, seconds, seconds, "history", "")


def running(key, queue, units, ends_in, *, flavor="h100", priority=0, started=NOW - 100, domain="", level=""):
    return Work(key, queue, flavor, units, priority, (started, key), exact(NOW + ends_in - started), name=f"job-{key}",
                started=started, domain=domain, level=level)


def waiting(key, queue, units, runs=600.0, *, flavor="h100", priority=0, submitted=None, level="", may_preempt=True):
    return Work(key, queue, flavor, units, priority, (submitted if submitted is not None else NOW - 50 + key, key),
                exact(runs), name=f"job-{key}", level=level, may_preempt=may_preempt)


def two_teams(a=(8, 0), b=(8, 0), cohort="pool") -> World:
    return World(queues={"a": Queue("a", cohort, {"h100": a[0]}, {"h100": a[1]}),
                         "b": Queue("b", cohort, {"h100": b[0]}, {"h100": b[1]})},
                 capacity={"h100": a[0] + b[0]})


def starts(result, *keys):
    return [None if result[k].start is None else result[k].start[1] - NOW for k in keys]


@pytest.mark.parametrize("backend", POLICIES)
def test_a_job_waits_for_the_one_ahead_of_it_to_end_and_the_range_follows_the_runs(backend):
    world = two_teams()
    works = [running(1, "a", 8, ends_in=300),
             Work(2, "a", "h100", 8, 0, (NOW - 100, 2), Span(400, 600, 900, "history", ""), name="next"),
             waiting(3, "a", 8)]
    result = forecast(world, works, POLICIES[backend](), NOW)
    assert result[1].end == (NOW + 300, NOW + 300, NOW + 300)
    assert result[2].start == (NOW + 300, NOW + 300, NOW + 300) and result[2].freed_by == 1
    assert result[3].start == (NOW + 700, NOW + 900, NOW + 1200)  # behind job 2's early, likely and late runs
    assert (result[2].ahead, result[3].ahead) == (0, 1)


@pytest.mark.parametrize("backend", POLICIES)
def test_higher_priority_goes_first_and_a_job_that_does_not_fit_does_not_block_the_next(backend):
    works = [running(1, "a", 6, ends_in=100), waiting(2, "a", 8, submitted=NOW - 99),
             waiting(3, "a", 2, submitted=NOW - 50),
             waiting(4, "a", 4, priority=10, submitted=NOW - 10, may_preempt=False)]
    result = forecast(two_teams(), works, POLICIES[backend](), NOW)
    assert starts(result, 3) == [0]  # fits beside job 1 though job 2, ahead of it, does not
    assert starts(result, 4) == [100]  # higher priority: before job 2 once job 1 ends
    assert starts(result, 2) == [700]


def test_kueue_borrows_the_cohorts_unused_quota_within_the_borrowing_limit():
    world = two_teams(a=(8, 4), b=(8, 0))
    assert starts(forecast(world, [waiting(1, "a", 12)], KueuePolicy(), NOW), 1) == [0]  # 8 + 4 borrowed
    works = [running(1, "a", 12, ends_in=300), waiting(2, "a", 1)]
    assert starts(forecast(world, works, KueuePolicy(), NOW), 2) == [300]  # b has 4 free, past a's limit


def test_kueue_admits_what_needs_no_borrowing_before_what_does():
    world = two_teams(a=(8, 4), b=(8, 0))
    result = forecast(world, [waiting(1, "a", 12), waiting(2, "a", 4)], KueuePolicy(), NOW)
    assert starts(result, 1, 2) == [600, 0]  # job 2 came later, but needs no borrowing


def test_kueue_without_a_cohort_never_borrows_and_says_a_job_past_the_limit_cannot_start():
    world = World(queues={"a": Queue("a", "", {"h100": 8}, {})})
    result = forecast(world, [waiting(1, "a", 12)], KueuePolicy(), NOW)
    assert result[1].start is None and "could ever get (8" in result[1].never


def test_kueue_reclaims_lent_quota_from_a_borrower_of_any_priority():
    world = two_teams(a=(8, 8), b=(8, 8))
    works = [running(1, "a", 8, ends_in=5000, priority=100), running(2, "a", 8, ends_in=5000, priority=100,
                                                                      started=NOW - 10),
             waiting(3, "b", 8, priority=0)]
    result = forecast(world, works, KueuePolicy(), NOW)
    assert starts(result, 3) == [0] and result[3].preempts == (2,)  # the newest of the borrower's workloads
    assert result[2].end[1] > NOW + 5000  # it runs again, later


def test_kueue_preempts_lower_priority_in_its_own_queue_but_not_equal_priority():
    world = two_teams()
    works = [running(1, "a", 8, ends_in=1000), waiting(2, "a", 8, priority=5), waiting(3, "a", 8, priority=0)]
    result = forecast(world, works, KueuePolicy(), NOW)
    assert starts(result, 2) == [0] and result[2].preempts == (1,)
    assert starts(result, 3) == [1700]  # behind job 1, which starts its run again (1,100 s) at 600
    never = [running(1, "a", 8, ends_in=1000), waiting(2, "a", 8, priority=5, may_preempt=False)]
    assert starts(forecast(world, never, KueuePolicy(), NOW), 2) == [1000]  # its tier never preempts


def test_kueue_preempts_the_newest_first_counting_jobs_the_replay_started():
    world = World(queues={"a": Queue("a", "", {"h100": 12})})
    works = [running(1, "a", 2, ends_in=9000, started=NOW - 1000), running(2, "a", 6, ends_in=100, priority=60),
             waiting(3, "a", 8, priority=50), waiting(4, "a", 4, runs=9000)]
    result = forecast(world, works, KueuePolicy(), NOW)
    # Job 3 cannot make room at first (job 1 alone is too little); job 4 takes the free 4 meanwhile. When job 2
    # ends, job 3 needs 2 more: job 4, started by the replay, is newer than job 1 and goes first.
    assert starts(result, 4, 3) == [0, 100] and result[3].preempts == (4,)


@pytest.mark.parametrize("backend", POLICIES)
def test_a_job_submitted_later_joins_its_queue_then_and_a_higher_priority_goes_ahead(backend):
    works = [running(1, "a", 8, ends_in=300), running(2, "b", 8, ends_in=9000),
             waiting(3, "a", 8), replace(waiting(4, "a", 8, priority=10, may_preempt=False), arrives=NOW + 200),
             replace(waiting(5, "a", 8, priority=10, may_preempt=False), arrives=NOW + 9000)]
    result = forecast(two_teams(), works, POLICIES[backend](), NOW)
    assert starts(result, 3) == [900]  # job 4, submitted at 200, takes job 1's room at 300; job 5 comes too late
    assert set(result) == {1, 2, 3}  # no estimate for what is not submitted
    alone = forecast(two_teams(), works[:3], POLICIES[backend](), NOW)
    assert starts(alone, 3) == [300]


def test_a_job_due_to_end_now_makes_its_room_before_anyone_is_offered_it():
    world = World(queues={"a": Queue("a", "", {"h100": 8})})
    works = [running(1, "a", 4, ends_in=0), running(2, "a", 2, ends_in=9000),
             waiting(3, "a", 2, submitted=NOW - 900), waiting(4, "a", 6, priority=100, may_preempt=False)]
    result = forecast(world, works, KueuePolicy(), NOW)
    assert starts(result, 4) == [0] and starts(result, 3)[0] > 0  # job 1's 4 go to the higher priority first


def test_kueue_does_not_reclaim_for_a_job_that_would_borrow():
    world = two_teams(a=(8, 8), b=(4, 8))
    works = [running(1, "a", 12, ends_in=1000), waiting(2, "b", 8)]  # b's 8 exceeds its nominal 4
    assert starts(forecast(world, works, KueuePolicy(), NOW), 2) == [1000]


def test_kueue_cohorts_nest_and_a_department_borrows_from_the_cluster():
    world = World(queues={"a": Queue("a", "dept", {"h100": 4}, {"h100": 8}),
                          "b": Queue("b", "root", {"h100": 8}, {"h100": 0})},
                  cohorts={"dept": Cohort("dept", "root"), "root": Cohort("root")})
    result = forecast(world, [waiting(1, "a", 12)], KueuePolicy(), NOW)
    assert starts(result, 1) == [0]


@pytest.mark.parametrize(("weights", "first"), [((1, 1, 1), 3), ((1, 1, 2), 4), ((4, 1, 2), 3)])
def test_kueue_fair_sharing_gives_freed_quota_to_the_queue_with_the_lower_weighted_share(weights, first):
    holdings = [Holding(team, "pool", "", "h100", nominal, 8, weight=weight)
                for team, nominal, weight in zip("abc", (4, 4, 8), weights, strict=True)]
    world = KueuePolicy().world(holdings, cohort="pool", capacity={"h100": 16}, resources={})
    assert world.fair == (weights != (1, 1, 1))
    works = [running(1, "a", 8, ends_in=9000), running(2, "b", 4, ends_in=9000),
             waiting(3, "a", 4, submitted=NOW - 100), waiting(4, "b", 4, submitted=NOW - 50)]
    result = forecast(world, works, KueuePolicy(), NOW)
    # First come without fair sharing; with it b (borrowing 4 after) before a (8), unless a's weight outweighs it.
    assert starts(result, first, 7 - first) == [0, 600]  # the other when the first one's run ends


@pytest.mark.parametrize("backend", POLICIES)
def test_a_gang_starts_only_when_all_its_workers_fit(backend):
    works = [running(1, "a", 4, ends_in=100), running(2, "a", 2, ends_in=300), waiting(3, "a", 6),
             waiting(4, "a", 2)]
    result = forecast(two_teams(), works, POLICIES[backend](), NOW)
    assert starts(result, 3, 4) == [300, 0]  # 6 together: not at 100, when only 4 + 2 - 2 are free


@pytest.mark.parametrize("backend", POLICIES)
def test_a_topology_required_job_waits_for_one_domain_with_room(backend):
    world = World(queues={"a": Queue("a", "", {"h100": 16}, {})}, capacity={"h100": 16},
                  domains={("h100", "rack"): {"r1": 8, "r2": 8}})
    works = [running(1, "a", 4, ends_in=100, domain="r1", level="rack"),
             running(2, "a", 4, ends_in=300, domain="r2", level="rack"), waiting(3, "a", 8, level="rack")]
    result = forecast(world, works, POLICIES[backend](), NOW)
    assert starts(result, 3) == [100]  # 8 GPUs are free at once, but in no single rack until job 1 ends
    too_big = forecast(world, [waiting(5, "a", 12, level="rack")], POLICIES[backend](), NOW)
    assert too_big[5].start is None


def test_volcano_enqueue_lets_a_queue_borrow_idle_gpus_up_to_its_capability():
    """The portal's queues guarantee nothing, so a queue's real capability is its capability (at most the cluster):
    a borrows b's idle GPUs, and b's job takes its deserved 8 back by reclaim."""
    world = two_teams(a=(8, 8), b=(8, 0))
    works = [waiting(1, "a", 12), waiting(2, "b", 8), waiting(3, "a", 20)]
    result = forecast(world, works, VolcanoPolicy(), NOW)
    assert result[3].never and "more than its queue may ever hold (16)" in result[3].never
    assert starts(result, 1, 2) == [0, 0] and result[2].preempts == (1,)


def test_volcano_with_the_capacity_plugin_bounds_a_queue_by_its_real_capability_and_reclaims():
    """capacity.go realCapability: a queue holds at most its capability and the cluster less the other queues'
    guarantees, of which the portal's queues have none. On 16 GPUs a may borrow b's idle 8; on 24 b takes its
    deserved 8 back from a, whichever way a's 16 are split into pods, while a job of higher priority outside the
    portal's queues holds the rest (reclaim takes the lowest priority first)."""
    holdings = [Holding("a", "", "", "h100", 8, 8), Holding("b", "", "", "h100", 8, 0)]
    policy = VolcanoPolicy(capacity_plugin=True)
    tight = policy.world(holdings, cohort="", capacity={"h100": 16}, resources={})
    assert tight.reclaim and not tight.preempt
    assert starts(forecast(tight, [waiting(1, "a", 12)], policy, NOW), 1) == [0]
    assert "more than its queue may ever hold (16)" in forecast(tight, [waiting(1, "a", 24)], policy, NOW)[1].never
    world = policy.world(holdings, cohort="", capacity={"h100": 24}, resources={})
    assert starts(forecast(world, [waiting(1, "a", 12)], policy, NOW), 1) == [0]
    outside = running(9, "gone", 8, ends_in=5000, priority=10)
    works = [replace(running(1, "a", 16, ends_in=1000), workers=2), outside, waiting(2, "b", 8)]
    result = forecast(world, works, policy, NOW)
    assert starts(result, 2) == [0] and result[2].preempts == (1,)  # b takes its deserved 8 back
    # a's one pod of 16 goes too, though a falls below its own 8 (Kueue's reclaim takes a borrowing workload whole
    # likewise); the job of higher priority outside the portal's queues stays.
    works = [running(1, "a", 16, ends_in=1000), outside, waiting(2, "b", 8)]
    result = forecast(world, works, policy, NOW)
    assert starts(result, 2) == [0] and result[2].preempts == (1,)


def test_volcano_reclaims_only_from_a_queue_above_its_deserved_share():
    policy = VolcanoPolicy(capacity_plugin=True)
    world = policy.world([Holding("a", "", "", "h100", 8, 8), Holding("b", "", "", "h100", 8, 0)], cohort="",
                         capacity={"h100": 12}, resources={})
    works = [running(1, "a", 8, ends_in=1000), running(2, "b", 4, ends_in=5000), waiting(3, "b", 4)]
    assert starts(forecast(world, works, policy, NOW), 3) == [1000]  # a holds exactly its deserved 8: kept


def test_volcano_reclaims_pods_only_while_their_queue_is_above_its_deserved_share():
    """capacity.go reclaimableFn (checkDeservedExceedance, victim by victim): a's 10 is above its deserved 8, so its
    newest job of 2 may go, but then a holds 8 and no more of it may; the 4 b needs wait for a's jobs to end."""
    policy = VolcanoPolicy(capacity_plugin=True)
    world = policy.world([Holding("a", "", "", "h100", 8, 8), Holding("b", "", "", "h100", 8, 0)], cohort="",
                         capacity={"h100": 12}, resources={})
    works = [running(1, "a", 4, ends_in=1000), running(4, "a", 4, ends_in=1000, started=NOW - 10),
             running(5, "a", 2, ends_in=1000, started=NOW - 5), running(2, "b", 2, ends_in=5000), waiting(3, "b", 4)]
    result = forecast(world, works, policy, NOW)
    assert starts(result, 3) == [1000] and result[3].preempts == ()


def test_volcano_reclaims_only_for_a_job_within_its_queues_deserved_share():
    """capacity.go preemptiveFn: b holds 4 of its deserved 8, so it reclaims for a job of 4 but not for one of 8
    (it would hold 12), though a is above its own share."""
    policy = VolcanoPolicy(capacity_plugin=True)
    world = policy.world([Holding("a", "", "", "h100", 8, 8), Holding("b", "", "", "h100", 8, 8)], cohort="",
                         capacity={"h100": 16}, resources={})
    works = [running(1, "a", 4, ends_in=1000), running(4, "a", 4, ends_in=1000, started=NOW - 10),
             running(5, "a", 4, ends_in=1000, started=NOW - 5), running(2, "b", 4, ends_in=5000)]
    # b may hold 16, but reclaims for no job of 8: it waits for a's jobs to end.
    assert starts(forecast(world, [*works, waiting(3, "b", 8)], policy, NOW), 3) == [1000]
    result = forecast(world, [*works, waiting(3, "b", 4)], policy, NOW)
    assert starts(result, 3) == [0] and result[3].preempts == (5,)  # a above 8: its newest goes


def test_volcano_preempts_and_reclaims_only_when_configured():
    world = World(queues={"a": Queue("a", "", {"h100": 8}, {"h100": 8}), "b": Queue("b", "", {"h100": 8}, {})},
                  capacity={"h100": 24}, preempt=False, reclaim=False)
    works = [running(1, "a", 8, ends_in=1000), running(2, "b", 8, ends_in=5000, started=NOW - 5),
             running(3, "b", 8, ends_in=5000, started=NOW - 5), waiting(4, "a", 8, priority=5)]
    assert starts(forecast(world, works, VolcanoPolicy(), NOW), 4) == [1000]  # upstream's default actions
    configured = World(**{**world.__dict__, "preempt": True})
    result = forecast(configured, works, VolcanoPolicy(), NOW)
    assert starts(result, 4) == [0] and result[4].preempts == (1,)
    full = [running(1, "a", 16, ends_in=1000), waiting(4, "a", 8, priority=5)]
    assert starts(forecast(configured, full, VolcanoPolicy(), NOW), 4) == [1000]  # not past enqueue: no victims
    reclaiming = World(queues={"a": Queue("a", "", {"h100": 8}, {"h100": 8}),
                               "b": Queue("b", "", {"h100": 8}, {"h100": 16})}, capacity={"h100": 24},
                       preempt=False, reclaim=True)
    borrowed = [running(1, "b", 8, ends_in=900), running(2, "b", 8, ends_in=900, started=NOW - 5),
                running(3, "b", 8, ends_in=900, started=NOW - 50), waiting(4, "a", 8)]
    result = forecast(reclaiming, borrowed, VolcanoPolicy(), NOW)
    assert starts(result, 4) == [0] and result[4].preempts == (2,)  # b is above its deserved 8: its newest goes


def test_volcano_reclaims_for_a_smaller_job_after_a_larger_one_of_its_queue_could_not():
    """actions/reclaim tries every starving job of a queue: b's job of 8 may not reclaim (b would hold 12 of its
    deserved 8), its later job of 4 may."""
    policy = VolcanoPolicy(capacity_plugin=True)
    world = policy.world([Holding("a", "", "", "h100", 8, 8), Holding("b", "", "", "h100", 8, 8)], cohort="",
                         capacity={"h100": 16}, resources={})
    works = [running(1, "a", 4, ends_in=1000), running(4, "a", 4, ends_in=1000, started=NOW - 10),
             running(5, "a", 4, ends_in=1000, started=NOW - 5), running(2, "b", 4, ends_in=5000),
             waiting(3, "b", 8), waiting(6, "b", 4)]
    result = forecast(world, works, policy, NOW)
    assert starts(result, 6) == [0] and result[6].preempts == (5,)


def test_volcano_with_the_capacity_plugin_serves_the_queue_with_the_lowest_share_first():
    """capacity.go QueueOrderFn (actions/allocate pops the queue with the lowest allocated / deserved): b, at half
    its share, gets the last 4 before a's earlier job; by the job order alone a's would go first."""
    holdings = [Holding("a", "", "", "h100", 8, 8), Holding("b", "", "", "h100", 8, 8)]
    # 24 GPUs, 8 held outside the queues: a may borrow the 8 no queue guarantees (its real capability is 16).
    works = [running(1, "a", 8, ends_in=1000), running(2, "b", 4, ends_in=5000), running(9, "gone", 8, ends_in=9000),
             waiting(3, "a", 4), waiting(4, "b", 4)]
    policy = VolcanoPolicy(capacity_plugin=True)
    world = policy.world(holdings, cohort="", capacity={"h100": 24}, resources={})
    assert starts(forecast(world, works, policy, NOW), 3, 4) == [600, 0]  # when b's job of 600 s ends
    by_order = World(**{**world.__dict__, "fair": False})
    result = forecast(by_order, works, policy, NOW)
    assert starts(result, 3, 4) == [0, 0] and result[4].preempts == (3,)  # a's would start, and be reclaimed


def test_volcano_counts_flavors_of_one_resource_together():
    world = World(queues={"a": Queue("a", "", {"h100": 4, "h100-b": 4}, {})},
                  capacity={"h100": 4, "h100-b": 4}, resources={"h100": "nvidia.com/gpu", "h100-b": "nvidia.com/gpu"})
    works = [running(1, "a", 6, ends_in=100), waiting(2, "a", 4, flavor="h100-b")]
    assert starts(forecast(world, works, VolcanoPolicy(), NOW), 2) == [100]


def test_a_held_queue_cannot_start_anything():
    world = World(queues={"a": Queue("a", "", {"h100": 8}, {}, held=True)})
    assert "held" in forecast(world, [waiting(1, "a", 1)], KueuePolicy(), NOW)[1].never


@pytest.mark.parametrize("backend", POLICIES)
def test_a_job_running_in_a_queue_the_portal_holds_no_quota_in_still_gets_its_end(backend):
    # A team whose quota was withdrawn while its job ran, or a job sent by hand to a queue the portal does not
    # manage: its end is still forecast, and it takes none of the known queues' quota.
    works = [running(1, "gone", 8, ends_in=300), waiting(2, "a", 8)]
    result = forecast(two_teams(), works, POLICIES[backend](), NOW)
    assert result[1].end == (NOW + 300, NOW + 300, NOW + 300)
    assert starts(result, 2) == [0]


@pytest.mark.parametrize("backend", POLICIES)
def test_a_thousand_waiting_jobs_are_forecast_well_under_a_second(backend):
    import random

    rng = random.Random(7)
    teams = [f"t{i}" for i in range(8)]
    world = World(queues={t: Queue(t, "pool", {"h100": 32, "a100": 16}, {"h100": 32, "a100": 16}) for t in teams},
                  capacity={"h100": 256, "a100": 128})
    works = [running(i, rng.choice(teams), rng.choice([1, 2, 4, 8]), rng.uniform(60, 7200),
                     flavor=rng.choice(["h100", "a100"])) for i in range(60)]
    works += [waiting(100 + i, rng.choice(teams), rng.choice([1, 2, 4, 8, 16]), rng.uniform(300, 4 * 3600),
                      flavor=rng.choice(["h100", "a100"]), priority=rng.choice([0, 0, 0, 10]))
              for i in range(1000)]
    policy = POLICIES[backend]()
    if backend == "volcano":  # as the portal configures Volcano: the capacity plugin, reclaim, no preempt
        policy = VolcanoPolicy(capacity_plugin=True)
        world = replace(world, preempt=False, reclaim=True, fair=True)
    gc.collect()  # the garbage earlier tests left is not this code's cost
    started = time.process_time()
    result = forecast(world, works, policy, NOW)
    spent = time.process_time() - started
    assert all(result[w.key].start for w in works if not w.running)
    assert spent < 2.0, f"{spent:.2f} s of CPU (the bench measures it on a quiet machine)"


# --- run-time evidence ---------------------------------------------------------------------------------------------


def test_no_history_leaves_the_runtime_limit():
    span = runtimes.span(limit=3600)
    assert (span.likely, span.late, span.evidence) == (3600, 3600, "limit")


def test_history_gives_a_robust_quantile_not_a_mean():
    span = runtimes.span(limit=36000, samples=[600, 610, 620, 630, 640, 30000])
    assert span.evidence == "history" and 620 <= span.likely <= 640  # one runaway run does not move it
    assert span.early < span.likely < span.late


def test_history_is_capped_by_the_limit_and_a_running_job_is_judged_by_the_longer_runs():
    assert runtimes.span(limit=500, samples=[600, 700, 800]).likely == 500
    span = runtimes.span(limit=3600, samples=[100, 200, 900, 1000, 1100], elapsed=500)
    assert span.likely == 1000 and span.early >= 500


def test_a_run_that_outlived_its_history_ends_soon_and_by_its_limit():
    span = runtimes.span(limit=3600, samples=[100, 120], elapsed=1000)
    assert span.evidence == "outlived" and 1000 < span.likely < 1100 and span.late == 3600


def test_progress_wins_where_known():
    span = runtimes.span(limit=36000, samples=[100], elapsed=600, progress=0.5)
    assert span.evidence == "progress" and span.likely == 1200


def test_the_closest_comparable_runs_with_enough_of_them_are_chosen():
    assert runtimes.choose_samples([[1, 2, 3], [1, 2, 3, 4]]) == ([1, 2, 3], 0)
    assert runtimes.choose_samples([[1], [1, 2, 3, 4]]) == ([1, 2, 3, 4], 1)
    assert runtimes.choose_samples([[1], []]) == ([1], 0)
