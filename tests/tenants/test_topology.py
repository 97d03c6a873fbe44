"""A cluster's topology levels follow the Kueue Topology CRD's rules (kueue v0.19.2
config/components/crd/bases/kueue.x-k8s.io_topologies.yaml): 1-16 unique label keys, hostname only last."""

import pytest
from django.core.exceptions import ValidationError

from tenants.topology import level_label, level_names, validate_topology_levels

BLOCK = {"name": "block", "node_label": "topology.example.com/block"}
RACK = {"name": "rack", "node_label": "topology.example.com/rack"}
HOST = {"name": "host", "node_label": "kubernetes.io/hostname"}


def test_broadest_first_with_hostname_last_is_valid():
    validate_topology_levels([BLOCK, RACK, HOST])
    assert level_names([BLOCK, RACK, HOST]) == ["block", "rack", "host"]
    assert level_label([BLOCK, RACK], "rack") == "topology.example.com/rack"
    assert level_label([BLOCK, RACK], "host") == ""


@pytest.mark.parametrize(
    "levels, message",
    [
        ([HOST, RACK], "lowest"),
        ([RACK, RACK], "unique"),
        ([{"name": "Rack", "node_label": "x/rack"}], "Level name"),
        ([{"name": "rack", "node_label": "bad label/"}], "not a label key"),
        ([{"name": "rack"}], "not a label key"),
        ([{"name": "rack", "node_label": "x/r", "extra": 1}], "only a name"),
        ({"rack": "x"}, "A list"),
        ([{"name": f"l{i}", "node_label": f"x/l{i}"} for i in range(17)], "At most 16"),
    ],
)
def test_invalid_levels_are_refused_with_the_reason(levels, message):
    with pytest.raises(ValidationError, match=message):
        validate_topology_levels(levels)


# --- Kueue keeps a Topology's levels and a TAS flavor's labels --------------------------------------------------


def test_the_api_server_refuses_new_levels_on_a_topology_and_a_new_topology_name_on_a_flavor(strict_sandbox):
    """Why the reconcile makes flavors again rather than updating them: kueue v0.19.2's CRDs (x-kubernetes-validations
    with oldSelf)."""
    from portal import kube

    client = kube.client_for(kube.Connection(mode="sandbox", server=strict_sandbox.url))
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "gpu-portal"},
                "spec": {"levels": [{"nodeLabel": RACK["node_label"]}, {"nodeLabel": HOST["node_label"]}]}}
    client.apply(topology)
    with pytest.raises(kube.KubeError, match="field is immutable"):
        client.apply({**topology, "spec": {"levels": [{"nodeLabel": BLOCK["node_label"]},
                                                      {"nodeLabel": HOST["node_label"]}]}})
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"},
              "spec": {"nodeLabels": {"pool": "a"}, "topologyName": "gpu-portal"}}
    client.apply(flavor)
    with pytest.raises(kube.KubeError, match="nodeLabels are immutable when topologyName is set"):
        client.apply({**flavor, "spec": {"nodeLabels": {"pool": "b"}, "topologyName": "gpu-portal"}})


@pytest.mark.django_db
def test_applied_levels_and_a_topology_aware_flavors_labels_may_change():
    """Kueue would refuse these changes on the objects as they are; the reconcile makes the Topology and the
    flavors again instead (tests/quotas/test_replacing.py), so the console takes them."""
    from tenants import services
    from tests.factories import ClusterFactory, GpuFlavorFactory, PlatformAdminFactory

    admin = PlatformAdminFactory()
    kueue = ClusterFactory(name="east", scheduler="kueue", topology_levels=[RACK, HOST], observed_generation=1)
    services.cluster_update(actor=admin, cluster=kueue, topology_levels=[BLOCK, RACK, HOST])
    services.cluster_update(actor=admin, cluster=kueue, topology_levels=[])
    flavor = GpuFlavorFactory(cluster=kueue, name="h100")
    services.cluster_update(actor=admin, cluster=kueue, topology_levels=[RACK, HOST])
    flavor.node_labels = {"gpu-portal.io/flavor": "h100", "pool": "b"}
    services.gpu_flavor_save(actor=admin, flavor=flavor)
    kueue.refresh_from_db()
    assert kueue.topology_levels == [RACK, HOST] and kueue.generation > 1
