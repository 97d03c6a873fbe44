"""One rule for tests that need something outside Python: skip with the reason on a laptop, fail in CI.

CI sets REQUIRE_SERVICES (PostgreSQL, Redis, Prometheus, Chromium, kubectl), REQUIRE_CRDS (the upstream CRDs) and
REQUIRE_GPU_PROBE (the H200 samples in GPU_PROBE_DIR), so nothing it is meant to prove can quietly skip there. The
rule is the sandbox suite's (which stands alone and so cannot import this one).
"""

from sandbox.tests.requires import unavailable

__all__ = ["unavailable"]
