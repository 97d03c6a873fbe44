"""The sandbox suite's rule for tests that need something outside Python (kubectl, the upstream CRDs): skip with the
reason on a laptop, fail where the flag is set (CI sets REQUIRE_SERVICES and REQUIRE_CRDS), as the portal's suite
does. The sandbox's tests stand alone: they import nothing of the portal's suite."""

import os

import pytest


def unavailable(why: str, *, flag: str = "REQUIRE_SERVICES"):
    if os.environ.get(flag):
        pytest.fail(f"{why} (and {flag} is set)")
    pytest.skip(why)
