"""Whether the portal keeps a job back from its scheduler because the team's budget holds it (where the scheduler
would refuse the job outright: Volcano's webhook refuses jobs to a closed queue). Budgets belong to billing, a
layer above: billing registers the rule, and the job reconcile only asks it."""

from __future__ import annotations

_rules: list = []
_teams: list = []
_deciders: list = []


def register(rule, team_rule=None) -> None:
    """`rule(job)` → the sentence saying why the job is held, or "" when it may go to its scheduler;
    `team_rule(team)` → what holds the team's new jobs now ("" when nothing), for the submit form's warning."""
    _rules[:] = [rule]
    _teams[:] = [team_rule] if team_rule else []


def held(job) -> str:
    return _rules[0](job) if _rules else ""


def team_held(team) -> str:
    return _teams[0](team) if _teams else ""


def register_decider(decide) -> None:
    """`decide()`: judge the holds now (the cluster watcher calls it when a workload waits on the budget check)."""
    _deciders[:] = [decide]


def decide_now() -> None:
    if _deciders:
        _deciders[0]()
