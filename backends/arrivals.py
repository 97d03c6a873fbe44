"""Work expected to be submitted later, from a cluster's recent submissions (pure: values in, values out).

A job that waits long is often overtaken by work submitted after it: a higher priority, another team's queue
reclaiming what it lent, fair sharing ordering a queue below its share first. No one knows those submissions, but
the cluster's recent history says how often they come: per class of work (queue, flavor, priority, topology) its
rate over the recent window, and what such work asks for and runs (the class's own recent jobs, newest first, in
turn). The forecast replays them as jobs submitted later (`Work.arrives`), so the scheduler's own order decides
which of them go ahead of a waiting job.

Deterministic: the k-th arrival of a class of rate λ comes at a fixed quantile of its time (a Gamma(k, λ)
distribution): the median in the likely replay (`LIKELY_Z`), earlier in the late one (more work ahead) and later in
the early one, so the range widens by the arrivals' spread. Cheap: at most `MAX_ARRIVALS` per replay, the
horizon shortened to keep within it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from .forecast import EARLY, LATE, LIKELY, Span, Work

WINDOW = 7 * 86400.0  # the recent history the rates are taken from
HORIZON = 2 * 86400.0  # how far ahead arrivals are replayed
MIN_OBSERVED = 3600.0  # a shorter history says nothing of rates
MIN_SUBMITTED = 5  # nor does one with fewer submissions
MAX_ARRIVALS = 400
MAX_HISTORY = 5000  # the newest submissions read of the window (a busier cluster's rates rest on these)
# Each arrival's time as a fixed quantile of its distribution (a normal deviate): the median in the likely replay
# (an earlier quantile, the first quartile, helped Kueue's week by as much as it hurt Volcano's), the 10th and 90th
# percentiles in the late and early replays.
LIKELY_Z = 0.0
SPREAD_Z = 1.2816
KEY_BASE = -1_000_000_000  # expected arrivals' keys: below any job's and any preview's


@dataclass(frozen=True)
class Submitted:
    """A job of the cluster's recent history: when it was submitted, what it asked for and how long it ran (or is
    expected to run, while it runs or waits)."""

    at: float
    queue: str
    flavor: str
    units: int
    priority: int
    seconds: float
    may_preempt: bool = True
    level: str = ""

    @property
    def kind(self) -> tuple:
        return (self.queue, self.flavor, self.priority, self.may_preempt, self.level)


@dataclass(frozen=True)
class Outlook:
    """The arrivals each replay is given (early, likely, late) and what they rest on: the hours of history and how
    many jobs were submitted in them."""

    replays: tuple[tuple[Work, ...], tuple[Work, ...], tuple[Work, ...]] = ((), (), ())
    observed: float = 0.0
    submitted: int = 0
    rates: dict = field(default_factory=dict)  # class → jobs per hour

    def __bool__(self) -> bool:
        return bool(self.replays[LIKELY])

    def keys(self) -> set[int]:
        return {w.key for replay in self.replays for w in replay}


NONE = Outlook()


def expected(past: list[Submitted], now: float, *, since: float | None = None, window: float = WINDOW,
             horizon: float = HORIZON, limit: int = MAX_ARRIVALS) -> Outlook:
    """The arrivals to replay after `now`, from the submissions `past` within `window` (and after `since`, when the
    cluster's history begins; without it, at the first of them)."""
    recent = [s for s in past if now - window <= s.at <= now and (since is None or s.at >= since)]
    if not recent:
        return NONE
    observed = now - max(now - window, since if since is not None else min(s.at for s in recent))
    if observed < MIN_OBSERVED or len(recent) < MIN_SUBMITTED:
        return NONE
    classes: dict[tuple, list[Submitted]] = defaultdict(list)
    for s in sorted(recent, key=lambda s: (-s.at, s.queue, s.units)):
        classes[s.kind].append(s)
    rates = {kind: len(jobs) / observed for kind, jobs in classes.items()}
    horizon = min(horizon, limit / sum(rates.values()))
    replays = []
    for z in (SPREAD_Z, LIKELY_Z, -SPREAD_Z):  # early: arrivals late; late: arrivals early
        works = []
        for index, (kind, jobs) in enumerate(sorted(classes.items())):
            rate, k = rates[kind], 1
            while True:
                at = now + gamma_quantile(k, z) / rate
                if at > now + horizon:
                    break
                template = jobs[(k - 1) % len(jobs)]
                key = KEY_BASE - index * 10 * limit - k
                works.append(Work(key, template.queue, template.flavor, template.units, template.priority,
                                  (at, math.inf, key), Span(template.seconds, template.seconds, template.seconds,
                                                            "history", "expected arrival"),
                                  may_preempt=template.may_preempt, level=template.level, arrives=at))
                k += 1
        works.sort(key=lambda w: w.seq)
        replays.append(tuple(works[:limit]))  # the late replay's come sooner: as many as the others at most
    return Outlook((replays[EARLY], replays[LIKELY], replays[LATE]), observed, len(recent),
                   {kind: rate * 3600 for kind, rate in rates.items()})


def gamma_quantile(k: int, z: float) -> float:
    """The quantile at normal deviate z of Gamma(k, 1), the time of a Poisson process's k-th event at rate 1
    (Wilson and Hilferty's approximation, within a few percent even for k = 1)."""
    return k * max(0.0, 1 - 1 / (9 * k) + z / (3 * math.sqrt(k))) ** 3
