"""Fault injection: answer matching requests with an error (or slow them down) instead of serving them."""

from __future__ import annotations

import itertools
import random
import threading
from dataclasses import asdict, dataclass, field

VERBS = ("get", "list", "watch", "create", "update", "patch", "apply", "delete", "deletecollection", "*")
FIELDS = ("verb", "resource", "status", "reason", "message", "delay", "count", "fraction", "seed", "group",
          "namespace", "name")


@dataclass
class Fault:
    id: int
    verb: str = "*"
    resource: str = "*"
    status: int | None = 500
    reason: str = "InternalError"
    message: str | None = None
    delay: float = 0.0
    count: int | None = None  # remaining hits; None = unlimited
    fraction: float | None = None
    seed: int = 0
    group: str | None = None
    namespace: str | None = None
    name: str | None = None
    hits: int = 0
    _rng: random.Random = field(default=None, repr=False)

    def matches(self, verb: str, group: str, resource: str, subresource: str | None, namespace: str | None,
                name: str | None) -> bool:
        if self.verb not in ("*", verb):
            return False
        full = f"{resource}/{subresource}" if subresource else resource
        if self.resource not in ("*", resource, full):
            return False
        if self.group is not None and self.group != group:
            return False
        if self.namespace is not None and self.namespace != namespace:
            return False
        return self.name is None or self.name == name

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["_rng"]
        return data


class Faults:
    """The fault table of one sandbox. Thread-safe; each fault's `fraction` draws from its own seeded RNG."""

    def __init__(self):
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)

    def add(self, verb: str = "*", resource: str = "*", status: int | None = 500, reason: str = "InternalError",
            message: str | None = None, delay: float = 0.0, count: int | None = None, fraction: float | None = None,
            seed: int = 0, group: str | None = None, namespace: str | None = None, name: str | None = None) -> int:
        """Add a fault and return its id.

        `count`: how many matching requests it hits; None means 1 without `fraction`, unlimited with it.
        `fraction`: the share of matching requests it hits (deterministic for a given `seed`).
        `status=None` with `delay` only slows requests down; they are then served normally.
        """
        if verb not in VERBS:
            raise ValueError(f"verb must be one of {', '.join(VERBS)}")
        if status is None and not delay:
            raise ValueError("a fault needs a status, a delay, or both")
        if fraction is not None and not 0 <= fraction <= 1:
            raise ValueError("fraction must be between 0 and 1")
        if count is None and fraction is None:
            count = 1
        with self._lock:
            fault = Fault(next(self._ids), verb, resource, status, reason, message, float(delay), count, fraction,
                          seed, group, namespace, name, _rng=random.Random(seed))
            self._faults.append(fault)
            return fault.id

    def list(self) -> list[dict]:
        with self._lock:
            return [f.to_dict() for f in self._faults]

    def get(self, fault_id: int) -> dict | None:
        with self._lock:
            return next((f.to_dict() for f in self._faults if f.id == fault_id), None)

    def remove(self, fault_id: int) -> bool:
        with self._lock:
            before = len(self._faults)
            self._faults = [f for f in self._faults if f.id != fault_id]
            return len(self._faults) != before

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def match(self, verb: str, group: str, resource: str, subresource: str | None, namespace: str | None,
              name: str | None) -> Fault | None:
        """The first fault that hits this request (consuming one of its `count`), or None."""
        with self._lock:
            for fault in self._faults:
                if not fault.matches(verb, group, resource, subresource, namespace, name):
                    continue
                if fault.fraction is not None and fault._rng.random() >= fault.fraction:
                    continue
                fault.hits += 1
                if fault.count is not None:
                    fault.count -= 1
                    if fault.count <= 0:
                        self._faults.remove(fault)
                return fault
        return None
