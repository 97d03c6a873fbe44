"""Checks that apps above tenancy register for tenancy writes they must agree to.

The quotas app's capacity invariant needs quota rows this layer does not know: it registers its checks here
(from its AppConfig.ready()), and the writes that could break it run them inside their transaction, before
saving. Events: "resume" (team=), "flavor" (flavor=, capacity=, overcommit=), "cluster" (cluster=, overcommit=).
"""

from collections import defaultdict

_capacity_checks: dict[str, list] = defaultdict(list)


def register_capacity_check(event: str, check) -> None:
    if check not in _capacity_checks[event]:
        _capacity_checks[event].append(check)


def capacity_checks_run(event: str, **change) -> None:
    """Raise the registered checks' ValidationError for a change about to be saved (forms call it to show the
    refusal on the field; the services call it again under their locks)."""
    for check in _capacity_checks[event]:
        check(**change)
