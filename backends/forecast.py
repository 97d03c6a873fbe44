"""When waiting jobs will start and running ones end: a forward simulation of one cluster's batch scheduler over the
jobs it holds now. Pure: values in, values out (no database, no clock, no cluster).

The engine replays what the scheduler would do as the running jobs end: at each moment capacity frees up it offers
the waiting jobs, in the scheduler's order, to the scheduler's admission rule (a `Policy`: quota, borrowing,
preemption), starts those admitted and moves the clock to the next end. A job starts whole (a gang needs every
worker at once), and one kept within a topology domain needs a domain with room for all of it. Run times are
ranges (`Span`: early, likely, late), so the replay runs three times (every job early, likely, late); the likely
run gives the estimate, the other two its range. What makes a job start is recorded (whose end freed the room), so
the estimate can say why. A job can also be given as to be submitted later (`Work.arrives`): it joins its queue
then, and gets no estimate of its own (what-if: how the later submissions change the others' starts); the jobs
the cluster's history says will be submitted later (`arrivals`) are replayed so, and each estimate says how many of
them start before it.

Cost: each moment offers only the head of each (queue, flavor, size) bucket, and a bucket stops being offered in a
moment once a job of its size or smaller has failed there, so a replay is near-linear in the jobs.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import replace

from .forecast_model import (  # the model is imported from here by the policies and callers
    EARLY,
    INF,
    LATE,
    LIKELY,
    Cohort,
    Estimate,
    Holding,
    Ledger,
    Policy,
    Queue,
    Span,
    Work,
    World,
)

__all__ = ["EARLY", "INF", "LATE", "LIKELY", "Cohort", "Estimate", "Holding", "Ledger", "Policy", "Queue", "Span",
           "Work", "World", "forecast", "largest_domain"]


def forecast(world: World, works: list[Work], policy: Policy, now: float,
             later: tuple[tuple[Work, ...], ...] = ((), (), ())) -> dict[int, Estimate]:
    """Every job's estimate: three replays (every run early, likely, late) combined. `later`: per replay, the jobs
    expected to be submitted later (`arrivals.expected`), replayed as they arrive; they get no estimate."""
    empty = policy.ledger(world)
    never = {w.key: why for w in [*works, *later[LATE], *later[EARLY]]
             if not w.running and (why := policy.impossible(world, empty, w))}
    runs = [_Replay(world, [*works, *later[which]], policy, now, which, never).run()
            for which in (EARLY, LIKELY, LATE)]
    ahead = _ahead(works, policy)
    overtaken = _overtaken(runs[LIKELY].starts, later[LIKELY], works, policy)
    result = {}
    for w in works:
        if w.arrives is not None:
            continue
        times = [(run.ends if w.running else run.starts).get(w.key) for run in runs]
        if w.running:  # preempted in a replay and not run again before it ended: the end it had
            times = [t if t is not None else max(now, w.started + w.span.at(i)) for i, t in enumerate(times)]
        if w.key in never or times[LIKELY] is None:
            result[w.key] = Estimate(w.key, never=never.get(w.key) or "nothing that runs now makes room for it",
                                     ahead=ahead.get(w.key, 0))
            continue
        known = [t for t in times if t is not None]
        trio = (min(known), times[LIKELY], max(known))
        if w.running:
            result[w.key] = Estimate(w.key, end=trio)
        else:
            likely = runs[LIKELY]
            result[w.key] = Estimate(w.key, start=trio, ahead=ahead.get(w.key, 0),
                                     freed_by=likely.freed_by.get(w.key),
                                     preempts=tuple(likely.preempted.get(w.key, ())),
                                     **overtaken.get(w.key, {}))
    return result


def _overtaken(starts: dict[int, float], later: tuple[Work, ...], works: list[Work], policy: Policy) -> dict:
    """Per waiting job, the expected later submissions of its scope (what competes for the same quota) that start
    before it: how many, and how many of them at a higher priority."""
    begun: dict = defaultdict(lambda: defaultdict(list))  # scope → priority → start times, in order
    for w in later:
        if w.key in starts:
            bisect.insort(begun[policy.scope(w)][w.priority], starts[w.key])
    found = {}
    for w in works:
        if not w.running and w.arrives is None and w.key in starts and policy.scope(w) in begun:
            counts = {p: bisect.bisect_left(times, starts[w.key]) for p, times in begun[policy.scope(w)].items()}
            if sum(counts.values()):
                found[w.key] = {"later": sum(counts.values()),
                                "later_higher": sum(n for p, n in counts.items() if p > w.priority)}
    return found


def _ahead(works: list[Work], policy: Policy) -> dict[int, int]:
    """Per waiting job, how many of its queue's waiting jobs come before it."""
    counts, seen = {}, defaultdict(int)
    for w in sorted((w for w in works if not w.running and w.arrives is None), key=policy.order):
        counts[w.key] = seen[w.queue]
        seen[w.queue] += 1
    return counts


class _Replay:
    """One replay: a moment's offers (`_offer`), then the next end, until no job waits or nothing runs."""

    def __init__(self, world: World, works: list[Work], policy: Policy, now: float, which: int, never: dict):
        self.evicted_from: set[str] = set()  # the queues the latest start took victims from
        self.world, self.policy, self.now, self.which = world, policy, now, which
        self.ledger = policy.ledger(world)
        self.domain_used: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.domain_most: dict[tuple[str, str], int] = {}
        self.running: dict[int, tuple[Work, float]] = {}
        self.events: list[tuple[float, int]] = []
        self.buckets: dict[tuple, list[tuple[tuple, Work]]] = defaultdict(list)
        self.starts: dict[int, float] = {}  # a waiting job's (first) start
        self.ends: dict[int, float] = {}  # when each job that runs ends (a preempted one's after its restart)
        self.freed_by: dict[int, int] = {}
        self.preempted: dict[int, list[int]] = {}
        self.waiting = 0
        self.owed = 0  # waiting jobs owed an estimate (not those to be submitted later)
        self.arrivals: list[tuple[float, int, Work]] = []
        self.scopes: dict[object, set[tuple]] = defaultdict(set)
        self.dirty: set = set()
        self.room: dict = {}
        self.no_victims: dict[object, float] = {}
        for w in works:
            if w.running:
                end = max(now, w.started + w.span.at(which))
                self._start(w, end, domain=w.domain)
            elif w.key in never:
                continue
            elif w.arrives is not None and w.arrives > now:
                heapq.heappush(self.arrivals, (w.arrives, w.key, w))
            else:
                self._enqueue(w)

    def run(self) -> _Replay:
        t, last_freed = self.now, self._stop_due(self.now)  # a job due to end now makes its room before anyone
        guard = 50 * (len(self.running) + self.waiting + len(self.arrivals)) + 100
        while self.owed and guard > 0:
            guard -= 1
            self._offer(t, last_freed)
            if not self.owed:
                break
            nxt = self._next_end()
            if nxt is None:
                break  # nothing runs that could make room: the rest never start
            t, last_freed = nxt
        return self

    # The waiting jobs, bucketed by (queue, flavor, units, level) in the scheduler's order, and the buckets by the
    # policy's scope (what one job's end can make room for): only scopes where something ended are offered again.

    def _enqueue(self, w: Work) -> None:
        name = (w.queue, w.flavor, w.units, w.level)
        bisect.insort(self.buckets[name], (self.policy.order(w), w), key=lambda item: item[0])
        scope = self.policy.scope(w)
        self.scopes[scope].add(name)
        self.dirty.add(scope)
        self.waiting += 1
        self.owed += w.arrives is None

    def _offer(self, t: float, freed: int | None) -> None:
        names = [name for scope in self.dirty for name in self.scopes[scope] if self.buckets[name]]
        self.dirty = set()
        for borrowing in self.policy.phases():
            failed: dict[tuple, int] = {}
            self.room, self.no_victims = {}, {}
            heads = [(self.buckets[name][0][0], name) for name in names if self.buckets[name] and (
                     borrowing or self.buckets[name][0][1].units <= self._room(self.buckets[name][0][1]))]
            if self.world.fair:
                offer = self._offer_ranked if hasattr(self.policy, "rank") else self._offer_fair
                offer([name for _, name in heads], t, freed, borrowing, failed)
                continue
            heapq.heapify(heads)
            while heads:
                _, name = heapq.heappop(heads)
                bucket = self.buckets[name]
                if not bucket:
                    continue
                w = bucket[0][1]
                group = (w.queue, w.flavor, w.level)
                if w.units >= failed.get(group, INF):
                    continue
                if not self._admit(w, t, freed, borrowing):
                    failed[group] = min(failed.get(group, INF), w.units)
                    continue
                bucket.pop(0)
                if bucket:
                    heapq.heappush(heads, (bucket[0][0], name))

    def _offer_fair(self, names: list[tuple], t: float, freed: int | None, borrowing: bool, failed: dict) -> None:
        """The same offers in the order fair sharing gives, decided one start at a time."""
        live = sorted(set(names))
        while live:
            i = self.policy.pick(self.world, self.ledger, [self.buckets[name][0][1] for name in live])
            name = live[i]
            bucket = self.buckets[name]
            w = bucket[0][1]
            group = (w.queue, w.flavor, w.level)
            if w.units >= failed.get(group, INF) or not self._admit(w, t, freed, borrowing):
                failed[group] = min(failed.get(group, INF), w.units)
                live.pop(i)
                continue
            bucket.pop(0)
            if not bucket:
                live.pop(i)

    def _offer_ranked(self, names: list[tuple], t: float, freed: int | None, borrowing: bool, failed: dict) -> None:
        """`_offer_fair` where a head's place depends on its own queue alone (`Policy.rank`): the live buckets in a
        heap, an entry ranked again when it comes up stale (its queue's share grew), and the buckets of the queues
        a start took victims from (their share fell, their heads changed) ranked again at once."""
        live = set(names)
        rank = self.policy.rank

        def entry(name: tuple) -> tuple:
            return rank(self.ledger, self.buckets[name][0][1]), name

        heap = [entry(name) for name in live]
        heapq.heapify(heap)
        while heap:
            key, name = heapq.heappop(heap)
            if name not in live or not self.buckets[name]:
                continue
            if (current := entry(name)) != (key, name):
                heapq.heappush(heap, current)
                continue
            w = self.buckets[name][0][1]
            group = (w.queue, w.flavor, w.level)
            self.evicted_from = set()
            if w.units >= failed.get(group, INF) or not self._admit(w, t, freed, borrowing):
                failed[group] = min(failed.get(group, INF), w.units)
                live.discard(name)
                continue
            self.buckets[name].pop(0)
            if not self.buckets[name]:
                live.discard(name)
            for other in (n for n in live if n[0] in self.evicted_from or n == name):
                if self.buckets[other]:
                    heapq.heappush(heap, entry(other))

    def _room(self, w: Work) -> float:
        scope = self.policy.scope(w)
        if scope not in self.room:
            self.room[scope] = self.policy.room(self.ledger, w)
        return self.room[scope]

    def _admit(self, w: Work, t: float, freed: int | None, borrowing: bool) -> bool:
        if not self._domain_room(w):
            return False
        if w.units > self._room(w) or not self.policy.fits(self.ledger, w, borrowing):
            searcher = (w.queue, w.units) if getattr(self.policy, "victims_by_size", False) else w.queue
            if not (borrowing and w.may_preempt and w.priority > self.no_victims.get(searcher, -INF)):
                return False
            victims = self._victims(w, searcher)
            if not victims:
                return False
            for victim in victims:
                self._evict(victim)
            self.preempted[w.key] = [v.key for v in victims]
        self.room.pop(self.policy.scope(w), None)
        self.waiting -= 1
        self.owed -= w.arrives is None
        self.starts.setdefault(w.key, t)
        if freed is not None:
            self.freed_by[w.key] = freed
        domain = self._domain_for(w)  # chosen once it starts: the victims' ends may have made the room
        self._start(replace(w, started=t), t + w.span.at(self.which), domain=domain)  # newest first as victims
        return True

    def _victims(self, w: Work, searcher: object) -> list[Work] | None:
        """Whom the job would preempt. Once a search failed in a moment, no job of its queue (and size, with the
        policy's `victims_by_size`: Volcano reclaims for every job) with no higher priority searches again then."""
        victims = self.policy.victims(self.ledger, w)
        if not victims:
            self.no_victims[searcher] = max(w.priority, self.no_victims.get(searcher, -INF))
        return victims

    def _start(self, w: Work, end: float, *, domain: str) -> None:
        self.ledger.charge(w, +1)
        self._hold(w, domain, +1)
        self.running[w.key] = (w if w.domain == domain else replace(w, domain=domain), end)
        self.ends[w.key] = end
        heapq.heappush(self.events, (end, w.key))

    def _stop(self, key: int) -> Work:
        w, _ = self.running.pop(key)
        self.ledger.charge(w, -1)
        self.dirty.add(self.policy.scope(w))
        self._hold(w, w.domain, -1)
        return w

    def _hold(self, w: Work, domain: str, sign: int) -> None:
        """Take (or give back) a running job's units in the topology domains: where its pods are, when they were
        read (a job of any level, or none), else the domain its required level placed it in."""
        if w.held:
            for level, name, units in w.held:
                self.domain_used[(w.flavor, level)][name] += sign * units
                self.domain_most.pop((w.flavor, level), None)
        elif w.level and domain:
            self.domain_used[(w.flavor, w.level)][domain] += sign * w.units
            self.domain_most.pop((w.flavor, w.level), None)

    def _evict(self, victim: Work) -> None:
        """A preempted job waits again from the start of its run, in its old place in line."""
        w = self._stop(victim.key)
        self.evicted_from.add(w.queue)
        self._enqueue(replace(w, started=None, domain="", held=()))
        self.ends.pop(w.key, None)

    def _next_end(self) -> tuple[float, int | None] | None:
        """Move to the next end, or the next arrival when one comes first: stop the job(s) that end then and queue
        those that arrive; the moment and (one of) the jobs that ended. None when nothing runs: arrivals alone
        never make room."""
        while self.events and (self.events[0][1] not in self.running
                               or self.running[self.events[0][1]][1] != self.events[0][0]):
            heapq.heappop(self.events)  # a stale end: the job was preempted
        if not self.events:
            return None
        t = min(self.events[0][0], self.arrivals[0][0] if self.arrivals else INF)
        while self.arrivals and self.arrivals[0][0] <= t:
            self._enqueue(heapq.heappop(self.arrivals)[2])
        return t, self._stop_due(t)

    def _stop_due(self, t: float) -> int | None:
        """Stop the jobs that end by `t`; (one of) them, or None."""
        found = None
        while self.events and self.events[0][0] <= t:
            end, key = heapq.heappop(self.events)
            if key in self.running and self.running[key][1] == end:
                self._stop(key)
                found = key
        return found

    def _domain_room(self, w: Work) -> bool:
        """Whether a job kept within one domain finds one with room now (always, where it needs none or the
        domains are not known): against the roomiest domain's room, kept until a start or an end there."""
        sizes = self.world.domains.get((w.flavor, w.level)) if w.level else None
        if not sizes:
            return True
        key = (w.flavor, w.level)
        if key not in self.domain_most:
            used = self.domain_used[key]
            self.domain_most[key] = max(size - used[name] for name, size in sizes.items())
        return w.units <= self.domain_most[key]

    def _domain_for(self, w: Work) -> str:
        """The domain a job that has room (`_domain_room`) takes: the fullest with room, as a bin-packer would; ""
        when it needs none or the domains are not known."""
        sizes = self.world.domains.get((w.flavor, w.level)) if w.level else None
        if not sizes:
            return ""
        used = self.domain_used[(w.flavor, w.level)]
        return min((size - used[name], name) for name, size in sizes.items() if size - used[name] >= w.units)[1]


def largest_domain(world: World, w: Work) -> int | None:
    """The units of the largest domain of the job's level, where known (a job larger can never start)."""
    sizes = world.domains.get((w.flavor, w.level)) if w.level else None
    return max(sizes.values()) if sizes else None
