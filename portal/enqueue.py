"""Sending a Celery task once the writing transaction commits, without ever failing the request that wrote.

A message is only a nudge: every row a task works on carries its own next attempt time, and the due sweeps (beat)
pick up whatever a lost message would have done. So a broker that is away when the transaction commits is logged
and counted, never raised: the write is already stored, and a 500 would make the client send it again.
"""

from __future__ import annotations

import logging

from django.core.cache import cache
from django.db import transaction

from portal.metrics import ENQUEUE_FAILURES

log = logging.getLogger(__name__)



def enqueue(task, *args, countdown: float | None = None) -> bool:
    """Send `task(*args)` now (to run `countdown` seconds later); False (logged) when the broker refused or was
    unreachable."""
    try:
        task.apply_async(args, countdown=countdown)
    except Exception as exc:  # noqa: BLE001 - kombu.OperationalError, redis errors, a timeout: all the same here
        _lost(task, args, exc)
        return False
    return True


def enqueue_coalesced(task, *args, key: str, within: float) -> bool:
    """Send `task(*args)` to run `within` seconds from now, unless one sent under `key` is still waiting to run: the
    changes of a busy moment share one run. Never raises: the cache is on the broker's Redis, and an unreachable one
    is logged and counted as a lost message is."""
    try:
        first = cache.add(key, 1, timeout=within)
    except Exception as exc:  # noqa: BLE001 - redis errors and timeouts alike
        _lost(task, args, exc)
        return False
    return enqueue(task, *args, countdown=within) if first else False


def _lost(task, args, exc: Exception) -> None:
    log.warning("could not enqueue %s%r (%s: %s); the due sweep will pick it up", task.name, args,
                type(exc).__name__, exc)
    ENQUEUE_FAILURES.labels(task.name).inc()


def enqueue_on_commit(task, *args) -> None:
    """Send `task(*args)` once the current transaction commits (at once outside one); never raises."""
    transaction.on_commit(lambda: enqueue(task, *args))
