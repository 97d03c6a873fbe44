import pytest


@pytest.fixture(params=["permissive", "upstream CRDs"])
def any_sandbox(request):
    """Every reconcile test runs against the built-in kinds and, where CRDS_DIR is set, the upstream CRDs."""
    return request.getfixturevalue("sandbox" if request.param == "permissive" else "strict_sandbox")
