"""Start estimates, measured: a week of jobs replayed on the sandbox's Kueue and Volcano simulators (in this process,
their clock driven by the replay), each job's estimate recorded when it is submitted and compared with when it
actually started; and the forecast's CPU for a cluster with 1,000 waiting jobs.

The trace: four teams sharing 40 GPUs (nominal quota and a borrowing limit each, as the portal configures their
ClusterQueues in one cohort, or their Volcano Queues: capability and deserved, with the portal's scheduler
configuration, capacity plugin and reclaim), two priority tiers, Poisson arrivals. Each team runs a handful of
images; an image's typical run time is heavy-tailed across images (log-normal, σ = 1.2 around 40 minutes, from
3 minutes to 20 hours), a run of it varies a little around that (σ = 0.15), and one run in thirty runs away until
its runtime limit stops it. Users declare limits of 1.5 to 4 times the typical run, rounded up to half an hour. On
Volcano a job of 4 or 8 GPUs is a gang of two workers (minAvailable: both).

The estimator sees what the portal would: the queues, the jobs running (since when, their limits), those waiting in
order, the runs that succeeded so far (so early in the week it knows little) and the submissions so far, whose rates
give the later submissions it allows for (`backends/arrivals.py`). It is compared with the naive
baseline: the job's position in its team's queue × the mean run time of the runs so far. As the portal does, the
estimates are also recomputed whenever the cluster changes (a job submitted, admitted, preempted or ended); the
estimate on display halfway through a job's wait is judged against the rest of its wait.

One scheduler and seed alone, printed and not written to RESULTS.md: `python -m bench.bench_estimates Volcano 7`
(`--jobs N` replays the trace's first N jobs only; `--diverging N` lists the first N jobs whose estimate at
submission missed, with what the forecast and the simulator did). `BENCH_ESTIMATES=Volcano:7,Kueue:29` limits
`make bench` the same way.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from collections import defaultdict
from dataclasses import dataclass

from backends import arrivals, forecast
from backends.kueue import BACKEND as KUEUE_BACKEND
from backends.volcano import BACKEND as VOLCANO_BACKEND
from bench.support import median, table
from jobs import runtimes

KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
T0 = 1_800_000_000.0
WEEK = 7 * 24 * 3600.0
TICK = 30.0  # the simulator is stepped at each submission and run's end, and at least this often
EPSILON = 0.001
TEAMS = {"vision": (14, 12), "nlp": (10, 10), "speech": (8, 8), "robotics": (8, 8)}  # nominal, borrowing limit
FLAVOR = "h100"
JOBS = 2_100
SEEDS = (29, 7)
TOLERANCE, SHORT = 0.25, 600.0


@dataclass
class TraceJob:
    key: int
    team: str
    image: str
    units: int
    priority: int
    submit: float
    duration: float
    limit: float
    admitted: float | None = None
    estimate: float | None = None
    baseline: float | None = None
    cannot: bool = False
    shown: list | None = None  # (when, likely start) each time the estimate was recomputed while it waited
    known_runs: float | None = None  # the estimate had every run time been known
    known_all: float | None = None  # … and every later submission too
    evicted: int = 0  # times the simulator preempted or reclaimed it

    @property
    def workers(self) -> int:
        """On Volcano, a job of 4 or more GPUs is a gang of two workers."""
        return 2 if self.units >= 4 else 1


def trace(seed: int = SEEDS[0], count: int = JOBS) -> list[TraceJob]:
    rng = random.Random(seed)
    images = {}
    for team in TEAMS:
        for i in range(6):
            base = min(20 * 3600, max(180, 2400 * math.exp(rng.gauss(0, 1.2))))
            images[(team, i)] = (base, rng.choice([1, 2, 2, 4, 4, 8]),
                                 math.ceil(base * rng.uniform(1.5, 4) / 1800) * 1800)
    jobs, t = [], T0
    rate = JOBS / WEEK
    for key in range(1, count + 1):
        t += rng.expovariate(rate)
        team = rng.choice(list(TEAMS))
        image = rng.randrange(6)
        base, units, limit = images[(team, image)]
        runaway = rng.random() < 1 / 30
        duration = base * 3 if runaway else base * math.exp(rng.gauss(0, 0.15))
        jobs.append(TraceJob(key, team, f"registry.example.com/{team}/model-{image}:1", units,
                             100 if rng.random() < 0.1 else 0, t, duration, limit))
    return jobs


def _kueue_world(store) -> None:
    kind = store.kind
    store.create(kind(KUEUE, "ResourceFlavor"), {"metadata": {"name": FLAVOR}, "spec": {}})
    for name, value in (("low", 0), ("high", 100)):
        store.create(kind(KUEUE, "WorkloadPriorityClass"), {"metadata": {"name": name}, "value": value})
    for team, (nominal, borrowing) in TEAMS.items():
        store.create(kind("v1", "Namespace"), {"metadata": {"name": team}})
        store.create(kind(KUEUE, "ClusterQueue"), {"metadata": {"name": team}, "spec": {
            "cohortName": "pool", "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": FLAVOR, "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": str(nominal), "borrowingLimit": str(borrowing)}]}]}]}})
        store.create(kind(KUEUE, "LocalQueue"), {"metadata": {"name": "default", "namespace": team},
                                                 "spec": {"clusterQueue": team}})


def _kueue_submit(store, job: TraceJob) -> None:
    template = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": job.image, "resources": {"limits": {"nvidia.com/gpu": str(job.units)}}}]}}
    store.create(store.kind("batch/v1", "Job"), {"metadata": {
        "name": f"job-{job.key}", "namespace": job.team,
        "labels": {"kueue.x-k8s.io/queue-name": "default",
                   "kueue.x-k8s.io/priority-class": "high" if job.priority else "low"},
        "annotations": _annotations(job)},
        "spec": {"parallelism": 1, "completions": 1, "activeDeadlineSeconds": int(job.limit),
                 "template": template}})


def _volcano_world(store) -> None:
    """The portal's scheduler configuration and, per team, the Queue it builds (`volcano_queue_manifest`):
    capability = guaranteed + burst, deserved = guaranteed, no guarantee."""
    kind = store.kind
    for obj in VOLCANO_BACKEND.scheduler_setup():
        store.create(kind(obj["apiVersion"], obj["kind"]), obj)
    for name, value in (("low", 0), ("high", 100)):
        store.create(kind("scheduling.k8s.io/v1", "PriorityClass"), {"metadata": {"name": name}, "value": value})
    for team, (nominal, borrowing) in TEAMS.items():
        store.create(kind("v1", "Namespace"), {"metadata": {"name": team}})
        store.create(kind(VOLCANO, "Queue"), {"metadata": {"name": team}, "spec": {
            "weight": 1, "reclaimable": True, "capability": {"nvidia.com/gpu": str(nominal + borrowing)},
            "deserved": {"nvidia.com/gpu": str(nominal)}}})


def _volcano_submit(store, job: TraceJob) -> None:
    per_worker = job.units // job.workers
    template = {"spec": {"restartPolicy": "Never", "activeDeadlineSeconds": int(job.limit), "containers": [
        {"name": "c", "image": job.image, "resources": {"limits": {"nvidia.com/gpu": str(per_worker)}}}]}}
    store.create(store.kind("batch.volcano.sh/v1alpha1", "Job"), {
        "metadata": {"name": f"job-{job.key}", "namespace": job.team, "annotations": _annotations(job)},
        "spec": {"schedulerName": "volcano", "queue": job.team, "minAvailable": job.workers,
                 "priorityClassName": "high" if job.priority else "low",
                 "tasks": [{"name": "main", "replicas": job.workers, "template": template}]}})


def _annotations(job: TraceJob) -> dict:
    return {"sandbox.gpu-portal.io/duration-seconds": str(job.duration), "sandbox.gpu-portal.io/startup-seconds": "0"}


@dataclass(frozen=True)
class Scheduler:
    name: str
    backend: object
    world: object  # builds the cluster in the sandbox's store
    submit: object


SCHEDULERS = (Scheduler("Kueue", KUEUE_BACKEND, _kueue_world, _kueue_submit),
              Scheduler("Volcano", VOLCANO_BACKEND, _volcano_world, _volcano_submit))


def _holdings() -> list[forecast.Holding]:
    return [forecast.Holding(team, "pool", "", FLAVOR, nominal, borrowing)
            for team, (nominal, borrowing) in TEAMS.items()]


class Portal:
    """What the portal knows of the cluster as the replay goes: who runs since when, who waits, past runs."""

    def __init__(self, scheduler: Scheduler, trace_jobs: list[TraceJob]):
        self.backend, self.trace = scheduler.backend, trace_jobs
        self.world = self.backend.estimate_world(_holdings(), cohort="pool",
                                                 capacity={FLAVOR: sum(n for n, _ in TEAMS.values())},
                                                 resources={FLAVOR: "nvidia.com/gpu"})
        self.running: dict[int, tuple[TraceJob, float]] = {}
        self.waiting: dict[int, TraceJob] = {}
        self.runs: dict[tuple, list] = defaultdict(list)
        self.all_runs: list[float] = []
        self.cpu: list[tuple[int, float]] = []
        self.past: dict[int, arrivals.Submitted] = {}  # the submissions so far, with their run times once known

    def work(self, job: TraceJob, now: float, since: float | None) -> forecast.Work:
        span = runtimes.span_from_runs(self.runs[(job.team, job.image)], flavor=FLAVOR, units=job.units,
                                       limit=job.limit, elapsed=now - since if since else 0.0)
        return forecast.Work(job.key, job.team, FLAVOR, job.units, job.priority, (job.submit, job.key), span,
                             name=f"job-{job.key}", started=since, workers=job.workers)

    def forecast(self, now: float) -> dict[int, forecast.Estimate]:
        works = [self.work(j, now, since) for j, since in self.running.values()]
        works += [self.work(j, now, None) for j in self.waiting.values()]
        later = arrivals.expected(list(self.past.values()), now, since=T0)
        return self.backend.estimate(self.world, works, now, later.replays)

    def submitted(self, job: TraceJob, now: float, ran: float | None = None) -> None:
        """What the history keeps of a submission: its run time as expected until it ends."""
        seconds = ran if ran is not None else self.work(job, now, None).span.likely
        self.past[job.key] = arrivals.Submitted(job.submit, job.team, FLAVOR, job.units, job.priority, seconds)

    def estimate(self, job: TraceJob, now: float) -> None:
        started = time.process_time()
        self.submitted(job, now)
        result = self.forecast(now)[job.key]
        self.cpu.append((len(self.waiting), time.process_time() - started))
        job.cannot = result.start is None
        job.estimate = (result.start[1] - now) if result.start else None
        ahead = sum(1 for j in self.waiting.values() if j.team == job.team and j.key != job.key
                    and (-j.priority, j.submit) < (-job.priority, job.submit))
        mean = sum(self.all_runs) / len(self.all_runs) if self.all_runs else 3600.0
        job.baseline = ahead * mean
        job.known_runs, job.known_all = self.what_if(job, now)

    def what_if(self, job: TraceJob, now: float) -> tuple[float | None, float | None]:
        """What limits the estimate: the same forecast given every job's true run time, then also every job
        submitted in the next day (with its true run time), as if they had been known."""
        def exact(j: TraceJob, since: float | None = None, arrives: float | None = None) -> forecast.Work:
            runs = min(j.duration, j.limit)
            return forecast.Work(j.key, j.team, FLAVOR, j.units, j.priority, (j.submit, j.key),
                                 forecast.Span(runs, runs, runs), started=since, arrives=arrives,
                                 workers=j.workers)

        works = [exact(j, since) for j, since in self.running.values()] + [exact(j) for j in self.waiting.values()]
        later = [exact(j, arrives=j.submit) for j in self.trace if now < j.submit <= now + 86400]
        found = []
        for given in (works, works + later):
            result = self.backend.estimate(self.world, given, now)[job.key]
            found.append(result.start[1] - now if result.start else None)
        return found[0], found[1]

    def recompute(self, now: float) -> None:
        """The cluster changed: every waiting job's estimate again, as the portal's refresh does."""
        for key, estimate in self.forecast(now).items():
            job = self.waiting.get(key)
            if job is not None and estimate.start:
                job.shown.append((now, estimate.start[1]))


def replay(jobs: list[TraceJob], scheduler: Scheduler) -> Portal:
    from sandbox import Sandbox

    portal = Portal(scheduler, jobs)
    by_name = {f"job-{j.key}": j for j in jobs}
    with Sandbox(simulate=True, tick=None, simulation={"startup": 0}) as sb:
        scheduler.world(sb.store)
        sim, pending = sb.simulator, list(jobs)
        t, end = T0, jobs[-1].submit + 2 * 24 * 3600
        while t < end and (pending or portal.running or portal.waiting):
            t = _next_step(t, pending, sim)
            changed = False
            while pending and pending[0].submit <= t:
                job = pending.pop(0)
                job.shown = []
                portal.waiting[job.key] = job
                portal.estimate(job, job.submit)
                scheduler.submit(sb.store, job)
                changed = True
            sim.step(t)
            seen = {}
            for described in sim.jobs():
                seen[described["name"]] = described["state"]
            for name, state in seen.items():
                job = by_name[name]
                if state != "pending" and job.key in portal.waiting:
                    del portal.waiting[job.key]
                    portal.running[job.key] = (job, t)
                    changed = True
                    if job.admitted is None:
                        job.admitted = t
                elif state == "pending" and job.key in portal.running:  # preempted: waits again
                    del portal.running[job.key]
                    job.evicted += 1
                    portal.waiting[job.key] = job
                    changed = True
            for key in [k for k, (job, _) in portal.running.items() if f"job-{job.key}" not in seen]:
                job, since = portal.running.pop(key)
                changed = True
                ran = t - since
                portal.submitted(job, t, ran)
                if job.duration <= job.limit:  # succeeded: history; a run stopped by its limit failed
                    portal.runs[(job.team, job.image)].append((ran, FLAVOR, job.units))
                    portal.all_runs.append(ran)
            if changed and portal.waiting:
                portal.recompute(t)
    return portal


def _next_step(t: float, pending: list[TraceJob], sim) -> float:
    """The simulator's next step: the next submission or change on its clock (a run's end; a scheduler reacts to
    those within its period of a second, so two ends seconds apart free their GPUs one after the other), at most
    TICK on."""
    return max(t + EPSILON, min(t + TICK, pending[0].submit if pending else math.inf, sim.next_event()))


def _judged(error: float, remaining: float) -> bool:
    return error <= max(TOLERANCE * remaining, SHORT)


def score(jobs: list[TraceJob], attr: str) -> dict:
    judged = [j for j in jobs if j.admitted is not None and getattr(j, attr) is not None]
    errors, within = [], 0
    for j in judged:
        actual = j.admitted - j.submit
        error = abs(getattr(j, attr) - actual)
        errors.append(error)
        within += _judged(error, actual)
    return {"n": len(judged), "within": within / len(judged) if judged else 0.0, "median": median(errors) if errors
            else 0.0}


def score_halfway(jobs: list[TraceJob]) -> dict:
    """The estimate on display halfway through each job's wait (the latest recomputed by then), against the rest
    of the wait."""
    errors, within = [], 0
    for j in jobs:
        halfway = j.submit + (j.admitted - j.submit) / 2
        shown = [likely for when, likely in j.shown if when <= halfway]
        likely = shown[-1] if shown else j.submit + j.estimate
        error = abs(likely - j.admitted)
        errors.append(error)
        within += _judged(error, j.admitted - halfway)
    return {"n": len(jobs), "within": within / len(jobs) if jobs else 0.0, "median": median(errors) if errors
            else 0.0}


def _forecast_cpu_at_1000() -> float:
    rng = random.Random(1)
    world = Portal(SCHEDULERS[0], []).world
    works, teams = [], list(TEAMS)
    for key in range(60):
        span = runtimes.span(limit=7200, samples=[rng.uniform(600, 5000) for _ in range(8)])
        works.append(forecast.Work(key, rng.choice(teams), FLAVOR, rng.choice([1, 2, 4]), 0, (T0 - 5000, key), span,
                                   started=T0 - rng.uniform(0, 3000)))
    for key in range(100, 1100):
        span = runtimes.span(limit=14400, samples=[rng.uniform(300, 7200) for _ in range(8)])
        works.append(forecast.Work(key, rng.choice(teams), FLAVOR, rng.choice([1, 2, 4, 8]), rng.choice([0, 0, 100]),
                                   (T0 - 1000 + key, key), span))
    past = [arrivals.Submitted(T0 - rng.uniform(0, WEEK), rng.choice(teams), FLAVOR, rng.choice([1, 2, 4, 8]),
                               rng.choice([0, 0, 100]), rng.uniform(300, 7200)) for _ in range(JOBS)]
    times = []
    for _ in range(3):
        started = time.process_time()
        KUEUE_BACKEND.estimate(world, works, T0, arrivals.expected(past, T0).replays)
        times.append(time.process_time() - started)
    return min(times)


def _fmt(seconds: float) -> str:
    return runtimes.minutes(seconds)


def _measure(scheduler: Scheduler, seed: int, count: int = JOBS) -> dict:
    jobs = trace(seed, count)
    started = time.perf_counter()
    portal = replay(jobs, scheduler)
    waited = [j for j in jobs if j.admitted is not None and j.admitted - j.submit > SHORT]
    return {"jobs": jobs, "portal": portal, "took": time.perf_counter() - started, "waited": waited,
            "all": score(jobs, "estimate"), "long": score(waited, "estimate"), "halfway": score_halfway(waited),
            "known_runs": score(waited, "known_runs"), "known_all": score(waited, "known_all"),
            "naive": score(jobs, "baseline"), "naive_long": score(waited, "baseline")}


def _rows(name: str, seed: int, m: dict) -> list[list[str]]:
    ours, naive, long, naive_long, half = m["all"], m["naive"], m["long"], m["naive_long"], m["halfway"]
    return [
        [name, str(seed), "all jobs", f"{ours['n']:,}", f"**{ours['within']:.0%}**", _fmt(ours["median"]),
         f"{naive['within']:.0%}", _fmt(naive["median"])],
        [name, str(seed), "waited > 10 min", f"{long['n']:,}", f"**{long['within']:.0%}**", _fmt(long["median"]),
         f"{naive_long['within']:.0%}", _fmt(naive_long["median"])],
        [name, str(seed), "waited > 10 min, estimate shown halfway", f"{half['n']:,}", f"{half['within']:.0%}",
         _fmt(half["median"]), "", ""],
        *([name, str(seed), f"waited > 10 min, *had {what} been known*", f"{m[key]['n']:,}",
           f"{m[key]['within']:.0%}", _fmt(m[key]["median"]), "", ""]
          for key, what in (("known_runs", "every run time"), ("known_all", "every run time and later submission"))),
    ]


def _waits(name: str, seed: int, m: dict) -> str:
    jobs = m["jobs"]
    waits = sorted(j.admitted - j.submit for j in jobs if j.admitted is not None)
    never = sum(1 for j in jobs if j.cannot)
    unstarted = sum(1 for j in jobs if j.admitted is None)
    return (f"{name}, seed {seed}: waits median {_fmt(median(waits))}, 90th percentile "
            f"{_fmt(waits[int(0.9 * len(waits))])}, longest {_fmt(waits[-1])}; {len(m['waited']):,} waited over "
            f"10 minutes; estimated unable to start: {never}; never started: {unstarted}; replay {m['took']:.0f} s.")


def selected(spec: str = "") -> list[tuple[Scheduler, int]]:
    """The (scheduler, seed) pairs to replay: all, or those `spec` names ("Volcano:7,Kueue:29")."""
    pairs = [(s, seed) for s in SCHEDULERS for seed in SEEDS]
    if not spec.strip():
        return pairs
    wanted = {tuple(part.strip().lower().split(":")) for part in spec.split(",") if part.strip()}
    chosen = [(s, seed) for s in SCHEDULERS for seed in {*SEEDS, *(int(w[1]) for w in wanted if len(w) == 2)}
              if (s.name.lower(), str(seed)) in wanted]
    if not chosen:
        raise SystemExit(f"BENCH_ESTIMATES={spec!r}: name scheduler:seed pairs, e.g. Volcano:7 "
                         f"(schedulers: {', '.join(s.name for s in SCHEDULERS)})")
    return sorted(chosen, key=lambda pair: (SCHEDULERS.index(pair[0]), pair[1]))


def diverging(jobs: list[TraceJob], count: int) -> str:
    """The first jobs (by submission) whose estimate at submission missed: what the forecast said, what happened."""
    lines = []
    for j in jobs:
        if j.admitted is None or j.estimate is None:
            continue
        actual = j.admitted - j.submit
        if _judged(abs(j.estimate - actual), actual):
            continue
        runs, later = ("never" if v is None else _fmt(v) for v in (j.known_runs, j.known_all))
        lines.append(f"job-{j.key} {j.team} {j.units} GPU (x{j.workers}) prio {j.priority} at "
                     f"+{_fmt(j.submit - T0)}: estimated {_fmt(j.estimate)}, waited {_fmt(actual)}, "
                     f"with true run times {runs}, and later submissions {later}; evicted {j.evicted}x")
        if len(lines) >= count:
            break
    return "\n".join(lines)


def run() -> str:
    measured = [(s.name, seed, _measure(s, seed)) for s, seed in selected(os.environ.get("BENCH_ESTIMATES", ""))]
    rows = [row for name, seed, m in measured for row in _rows(name, seed, m)]
    cpu = sorted(c for _, _, m in measured for _, c in m["portal"].cpu)
    biggest = max((item for _, _, m in measured for item in m["portal"].cpu), key=lambda item: item[0])
    at_1000 = _forecast_cpu_at_1000()
    jobs = measured[0][2]["jobs"]
    return (
        "## Start estimates (a week on the sandbox's Kueue and Volcano simulators)\n\n"
        f"{len(jobs):,} jobs over {(jobs[-1].submit - T0) / 86400:.1f} simulated days per trace (two seeds), "
        f"{sum(n for n, _ in TEAMS.values())} GPUs of nominal quota shared by {len(TEAMS)} teams (borrowing limits; "
        "Kueue: one cohort, LowerPriority / reclaim-Any preemption; Volcano: the portal's capacity plugin and reclaim "
        "action, jobs of 4 or 8 GPUs as gangs of two workers), 10 % of jobs at high priority, heavy-tailed run times "
        "per image, over-declared runtime limits, one run in thirty stopped by its limit. Each job's likely start "
        "was recorded when it was submitted (the estimator knowing only the runs finished by then, and allowing for "
        "later submissions at the rates of those so far) and compared "
        f"with its admission by the simulator, stepped at each submission and each run's end (at least every "
        f"{TICK:.0f} s). Within tolerance: |estimated − actual "
        "wait| ≤ 25 % of the actual wait, or ≤ 10 min. Baseline: position in the team's queue × the mean run time "
        "so far. *Shown halfway*: the estimate as recomputed on the cluster's changes, on display halfway through "
        "the job's wait, judged against the rest of the wait. *Had … been known*: what limits the estimate at "
        "submission, the same forecast given each job's true run time, then also every job submitted in the next "
        "day (what no estimator can know).\n\n"
        + table(["scheduler", "seed", "jobs", "count", "estimate within tolerance", "median abs. error",
                 "baseline within tolerance", "baseline median abs. error"], rows)
        + "\n\n" + "  \n".join(_waits(name, seed, m) for name, seed, m in measured)
        + f"\n\nForecast CPU per submission (the whole cluster): median {median(cpu) * 1e3:.1f} ms, "
        f"max {cpu[-1] * 1e3:.1f} ms (the largest queue met: {biggest[0]} waiting). **A cluster with 1,000 waiting "
        f"and 60 running jobs (and a week's {JOBS:,} submissions behind it, the arrivals they forecast replayed too): "
        f"{at_1000:.2f} s of CPU** (target: well under a second).\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Replay one scheduler and seed of the start-estimates bench.")
    parser.add_argument("scheduler", choices=[s.name for s in SCHEDULERS])
    parser.add_argument("seed", type=int)
    parser.add_argument("--jobs", type=int, default=JOBS, help="replay only the trace's first N jobs")
    parser.add_argument("--diverging", type=int, default=0, help="list the first N jobs whose estimate missed")
    args = parser.parse_args(argv)
    scheduler = next(s for s in SCHEDULERS if s.name == args.scheduler)
    m = _measure(scheduler, args.seed, args.jobs)
    print(table(["scheduler", "seed", "jobs", "count", "estimate within tolerance", "median abs. error",
                 "baseline within tolerance", "baseline median abs. error"], _rows(scheduler.name, args.seed, m)))
    print(_waits(scheduler.name, args.seed, m))
    if args.diverging:
        print(diverging(m["jobs"], args.diverging))


if __name__ == "__main__":
    from bench.support import django_setup

    django_setup()
    main()
