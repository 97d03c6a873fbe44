"""Whether the portal keeps a job back from its scheduler because the team's budget holds it (where the scheduler
would refuse the job outright: Volcano's webhook refuses jobs to a closed queue). Budgets belong to billing, a
layer above: billing registers the rule, and the job reconcile only asks it."""

from __future__ import annotations

_rules: list = []


def register(rule) -> None:
    """`rule(job)` → the sentence saying why the job is held, or "" when it may go to its scheduler."""
    _rules[:] = [rule]


def held(job) -> str:
    return _rules[0](job) if _rules else ""
