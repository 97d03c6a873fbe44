"""Sending a Celery task once the writing transaction commits, without ever failing the request that wrote.

A message is only a nudge: every row a task works on carries its own next attempt time, and the due sweeps (beat)
pick up whatever a lost message would have done. So a broker that is away when the transaction commits is logged
and counted, never raised: the write is already stored, and a 500 would make the client send it again.
"""

from __future__ import annotations

import logging

from django.db import transaction

from portal.metrics import ENQUEUE_FAILURES

log = logging.getLogger(__name__)



def enqueue(task, *args) -> bool:
    """Send `task(*args)` now; False (logged) when the broker refused or was unreachable."""
    try:
        task.delay(*args)
    except Exception as exc:  # noqa: BLE001 - kombu.OperationalError, redis errors, a timeout: all the same here
        log.warning("could not enqueue %s%r (%s: %s); the due sweep will pick it up", task.name, args,
                    type(exc).__name__, exc)
        ENQUEUE_FAILURES.labels(task.name).inc()
        return False
    return True


def enqueue_on_commit(task, *args) -> None:
    """Send `task(*args)` once the current transaction commits (at once outside one); never raises."""
    transaction.on_commit(lambda: enqueue(task, *args))
