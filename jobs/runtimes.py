"""How long a job will run, from the best evidence there is (pure: numbers in, a `forecast.Span` out).

In order: the job's own progress, where known (its elapsed time over the part done); else the run times of the
team's comparable jobs (same image and kind, flavor and size, else same image and kind), as quantiles, not a mean:
one runaway run must not move the estimate, and their spread is the range. A running job is judged by the comparable
runs that lasted longer than it has so far. Whatever the evidence, nothing runs past its runtime limit (the
scheduler stops it there); with no evidence the limit is all there is.
"""

from __future__ import annotations

from backends.forecast import Span

PROGRESS_STALE_AFTER = 30 * 60  # seconds: an older report is ignored (the job may hang, or its reporting broke)
PROGRESS_MEANINGFUL = 0.05  # a single report counts from this share done (before it, start-up time dominates)
MIN_SAMPLES = 3  # a closer match with fewer runs than this gives way to a broader one with more
OUTLIVED_SHARE = 0.25  # a run that outlived every comparable one is expected to end within this share of their median


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default method)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def choose_samples(levels: list[list[float]]) -> tuple[list[float], int]:
    """The closest level of comparable runs with enough of them (else the closest with any), and its index."""
    for index, samples in enumerate(levels):
        if len(samples) >= MIN_SAMPLES:
            return samples, index
    for index, samples in enumerate(levels):
        if samples:
            return samples, index
    return [], -1


def usable_progress(*, done: int | None, total: int | None, reports: int, since_start: float,
                    age: float) -> float | None:
    """The share done that a projection may rest on, or None. A report counts when it is fresh (at most
    PROGRESS_STALE_AFTER old: past that the job may be stuck, and history or the limit say more), came during
    the current run (`since_start`, the run's time when it was reported, is positive; a report from before a
    preemption is of another run) and is either one of a series (two or more of the same total) or a single
    one past PROGRESS_MEANINGFUL."""
    if not total or done is None or age > PROGRESS_STALE_AFTER or since_start <= 0:
        return None
    share = done / total
    if share <= 0 or (reports < 2 and share < PROGRESS_MEANINGFUL):
        return None
    return min(share, 1.0)


def span(*, limit: float, samples: list[float] = (), elapsed: float = 0.0, progress: float | None = None,
         described: str = "comparable runs") -> Span:
    """The job's whole run time (from its start) as early, likely and late, each at most `limit`."""
    if progress is not None and 0 < progress <= 1 and elapsed > 0:  # `elapsed`: the run's time at the report
        total = elapsed / progress
        left = total - elapsed  # the range is on what is left: the pace may change, the part done is done
        return _capped(elapsed + 0.8 * left, total, elapsed + 1.25 * left, limit, "progress",
                       f"it is {progress * 100:.0f} % done after {minutes(elapsed)}")
    runs = sorted(samples)
    if not runs:
        return Span(max(elapsed, 0.0), limit, limit, "limit", "its runtime limit")
    longer = [r for r in runs if r > elapsed]
    median = quantile(runs, 0.5)
    if not longer:
        likely = elapsed + max(60.0, OUTLIVED_SHARE * median)
        return _capped(elapsed, likely, limit, limit, "outlived",
                       f"it has run longer than all {len(runs)} {described} ({minutes(median)} median)")
    early, likely, late = (quantile(longer, q) for q in (0.1, 0.5, 0.9))
    if len(longer) < 5:  # too few to know the tails: widen by a tenth
        early, late = min(early, likely * 0.9), max(late, likely * 1.1)
    count = f"{len(runs)} {described}" if len(runs) != 1 else described.replace("runs", "run", 1)
    return _capped(max(early, elapsed), likely, late, limit, "history",
                   f"{count} took {minutes(median)} (median)")


def _capped(early: float, likely: float, late: float, limit: float, evidence: str, detail: str) -> Span:
    early, likely, late = min(early, limit), min(likely, limit), min(late, limit)
    if likely >= limit and evidence != "limit":
        detail += ", capped by its runtime limit"
    return Span(early, max(early, likely), max(likely, late), evidence, detail)


def minutes(seconds: float) -> str:
    """A duration as people say it: 45 s, 12 min, 3 h 20 min, 2 d 4 h."""
    seconds = max(0, int(round(seconds)))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        hours, rest = divmod(round(seconds / 60), 60)
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days, hours = divmod(round(seconds / 3600), 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def span_from_runs(runs: list[tuple[float, object, int]], *, flavor, units: int, limit: float,
                   elapsed: float = 0.0) -> Span:
    """A job's span from its team's runs of the same image and kind, each (seconds, flavor, units): those of its
    flavor and size first, else all of them."""
    same = [seconds for seconds, f, u in runs if f == flavor and u == units]
    samples, level = choose_samples([same, [seconds for seconds, _, _ in runs]])
    described = "earlier runs of this image" + (" at this size" if level == 0 else "")
    return span(limit=limit, samples=samples, elapsed=max(0.0, elapsed), described=described)
