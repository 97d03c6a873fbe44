"""A lease in Redis that at most one process holds at a time, for work that must run once across replicas.

Taken with `SET key token NX PX ttl`, renewed and released only by its holder (compare-and-set scripts), so a
process that stalled past its lease can neither extend nor drop its successor's. The holder counts as holding
only until `ttl` after its last successful renewal, so it stops acting before anyone else can take over
(client-go's leader election does the same with its renew deadline). Without `REDIS_URL` (the demo's single
process) a lease is always held locally.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from django.conf import settings

_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def _redis():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


class Lease:
    def __init__(self, name: str, ttl: float, client=None):
        self.key = f"gpu-portal:lease:{name}"
        self.ttl_ms = int(ttl * 1000)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._client = client if client is not None else (_redis() if settings.REDIS_URL else None)
        self._valid_until = 0.0

    def acquire_or_renew(self) -> bool:
        """Take the lease if it is free, extend it if ours; whether we hold it now. A Redis error means not held."""
        if self._client is None:
            return True
        started = time.monotonic()
        try:
            held = bool(self._client.set(self.key, self.token, nx=True, px=self.ttl_ms))
            if not held:
                held = bool(self._client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))
        except Exception:  # noqa: BLE001 - a Redis outage must stop us acting, never crash the loop
            held = False
        self._valid_until = started + self.ttl_ms / 1000 if held else 0.0
        return held

    def held(self) -> bool:
        """Whether we may still act: renewed within the ttl (measured from before the renewal was sent)."""
        return self._client is None or time.monotonic() < self._valid_until

    def release(self) -> None:
        if self._client is None:
            return
        self._valid_until = 0.0
        try:
            self._client.eval(_RELEASE, 1, self.key, self.token)
        except Exception:  # noqa: BLE001 - it expires on its own
            pass

    def holder(self) -> str | None:
        """Who holds the lease now (None when free, or without Redis)."""
        if self._client is None:
            return None
        try:
            value = self._client.get(self.key)
        except Exception:  # noqa: BLE001 - unknown counts as free: the caller falls back to polling
            return None
        return value.decode() if value else None
