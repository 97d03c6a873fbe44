"""What the start-time forecast (`backends.forecast`) reasons about: run-time ranges, jobs, queues and cohorts, the
world they make up, an estimate, and the two seams each scheduler's admission rule implements (`Policy`, and the
`Ledger` of what is in use). Values only."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

EARLY, LIKELY, LATE = 0, 1, 2
INF = math.inf


@dataclass(frozen=True)
class Span:
    """A run time in seconds (from the job's start), as a range, and what it rests on."""

    early: float
    likely: float
    late: float
    evidence: str = "limit"  # progress | history | outlived | limit
    detail: str = ""  # the same in words: "its runtime limit", "5 earlier runs took 40 min (median)"

    def at(self, which: int) -> float:
        return (self.early, self.likely, self.late)[which]


@dataclass(frozen=True)
class Work:
    """A job as the scheduler sees it: which queue, how many units of which flavor, its priority and its place in
    line (`seq`, lower first: submission time then id), and how long it runs."""

    key: int
    queue: str
    flavor: str
    units: int
    priority: int
    seq: tuple
    span: Span
    name: str = ""
    started: float | None = None  # running since (epoch seconds); None while waiting
    may_preempt: bool = True  # its priority tier may preempt
    level: str = ""  # a required topology level: every worker within one domain of it
    domain: str = ""  # running: the domain it holds
    arrives: float | None = None  # a job to be submitted later (a what-if): it joins its queue then
    held: tuple[tuple[str, str, int], ...] = ()  # running: the units its pods hold per (level, domain), where read
    workers: int = 1  # its pods, each units / workers (Volcano reclaims pod by pod)

    @property
    def running(self) -> bool:
        return self.started is not None


@dataclass(frozen=True)
class Queue:
    """A team's queue: nominal (guaranteed) units per flavor, the most it may borrow beyond them, the most of its
    nominal it lends to the cohort (None: no limit), under `parent` (a cohort; "" for none); `weight`: its share
    when busy queues share what is free (fair sharing)."""

    name: str
    parent: str = ""
    nominal: dict = field(default_factory=dict)
    borrowing: dict = field(default_factory=dict)
    lending: dict = field(default_factory=dict)
    held: bool = False
    weight: float = 1.0


@dataclass(frozen=True)
class Cohort:
    name: str
    parent: str = ""
    nominal: dict = field(default_factory=dict)
    weight: float = 1.0


@dataclass(frozen=True)
class World:
    """One cluster's scheduling configuration. `capacity`: physical units per flavor; `domains`: per (flavor,
    level) the units each domain holds, where known; `resources`: the extended resource each flavor is (Volcano
    counts resources, not flavors); `preempt`/`reclaim`: whether those scheduler actions are configured."""

    queues: dict[str, Queue]
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)
    domains: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    resources: dict[str, str] = field(default_factory=dict)
    preempt: bool = True
    reclaim: bool = True
    fair: bool = False  # fair sharing orders the queues' heads (`Policy.pick`)


@dataclass(frozen=True)
class Estimate:
    """For a waiting job its start, for a running one its end: (early, likely, late) epoch seconds; or `never`
    (why it cannot start under today's quotas). `ahead`: jobs of its queue before it in line; `freed_by`: the job
    whose end let it start in the likely replay (None: it starts now or on what was free); `preempts`: jobs the
    likely replay preempts for it."""

    key: int
    start: tuple[float, float, float] | None = None
    end: tuple[float, float, float] | None = None
    never: str = ""
    ahead: int = 0
    freed_by: int | None = None
    preempts: tuple[int, ...] = ()
    later: int = 0  # expected later submissions (`arrivals`) of its scope the likely replay starts before it
    later_higher: int = 0  # … of them at a higher priority


@dataclass(frozen=True)
class Holding:
    """What a team holds of one flavor, as the portal's rows say (for a policy to build its `World`)."""

    team: str
    parent: str  # the cohort / parent queue its queue joins ("" for none)
    department: str  # its department's cohort, when the parent is one ("" otherwise)
    flavor: str
    guaranteed: int
    burst: int
    held: bool = False
    weight: float = 1.0  # the team's fair-share weight
    department_weight: float = 1.0


class Ledger(Protocol):
    def charge(self, work: Work, sign: int) -> None: ...


class Policy(Protocol):
    """One scheduler's admission rule (`backends`): its world, its order, whether a job fits now, whom it would
    preempt."""

    def world(self, holdings: list[Holding], *, cohort: str, capacity: dict[str, int],
              resources: dict[str, str]) -> World: ...

    def ledger(self, world: World) -> Ledger: ...
    def impossible(self, world: World, empty, work: Work) -> str: ...  # why it can never start (`empty`: a ledger
    # with nothing running), or ""
    def order(self, work: Work) -> tuple: ...
    def pick(self, world: World, ledger, heads: list[Work]) -> int: ...  # with `world.fair`: which head goes next
    # (an order that moves as jobs start: the share each queue would reach)
    def phases(self) -> tuple[bool, ...]: ...  # passes per moment: (False, True) = non-borrowing ones first
    def scope(self, work: Work) -> object: ...  # jobs whose admission one job's end may change share a scope
    def room(self, ledger, work: Work) -> float: ...  # at least the units any job of the work's scope may get now
    def fits(self, ledger, work: Work, borrowing: bool) -> bool: ...
    def victims(self, ledger, work: Work) -> list[Work] | None: ...
