"""The control-plane lane (`make test-controlplane`, marker `controlplane`): one real etcd, kube-apiserver and
kube-controller-manager (tools/controlplane) for the whole session, with the upstream CRDs installed. The binaries
come from `make controlplane-bin`; CI sets REQUIRE_CONTROLPLANE, so there a missing binary fails the lane."""

import os

import pytest

from portal import kube
from tests.requires import unavailable
from tools import controlplane


@pytest.fixture(scope="session")
def control_plane():
    if missing := controlplane.missing_binaries():
        unavailable(f"{', '.join(missing)} not built: run `make controlplane-bin` (needs Go)",
                    flag="REQUIRE_CONTROLPLANE")
    crds = os.environ.get("CRDS_DIR", "")
    if not crds or not os.path.isdir(crds):
        unavailable(f"CRDS_DIR={crds!r} is not a folder of CRDs", flag="REQUIRE_CRDS")
    with controlplane.running(crds_dir=crds) as plane:
        yield plane


@pytest.fixture
def real_cluster(control_plane, settings):
    """Registers clusters as an operator would: connection "kubeconfig context", KUBECONFIG naming the file."""
    from tests.factories import ClusterFactory

    settings.KUBECONFIG = str(control_plane.kubeconfig)
    kube.forget_clients()

    def make(context: str = controlplane.CONTEXT, **fields):
        return ClusterFactory(connection="kubeconfig", server="", context=context, **fields)

    yield make
    kube.forget_clients()
