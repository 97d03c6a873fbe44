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
    """What the refusals below spare the admin: kueue v0.19.2's CRDs (x-kubernetes-validations with oldSelf)."""
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
def test_applied_kueue_levels_can_be_cleared_or_first_set_but_not_changed():
    from tenants import services
    from tests.factories import ClusterFactory, PlatformAdminFactory

    admin = PlatformAdminFactory()
    kueue = ClusterFactory(name="east", scheduler="kueue", topology_levels=[RACK, HOST], observed_generation=1)
    with pytest.raises(ValidationError, match="Kueue does not let a Topology's levels change"):
        services.cluster_update(actor=admin, cluster=kueue, topology_levels=[BLOCK, RACK, HOST])
    services.cluster_update(actor=admin, cluster=kueue, topology_levels=[])
    kueue.refresh_from_db()
    services.cluster_update(actor=admin, cluster=kueue, topology_levels=[BLOCK, RACK, HOST])
    never_applied = ClusterFactory(name="new", scheduler="kueue", topology_levels=[RACK], observed_generation=0)
    services.cluster_update(actor=admin, cluster=never_applied, topology_levels=[BLOCK])
    volcano = ClusterFactory(name="west", scheduler="volcano", topology_levels=[RACK, HOST], observed_generation=1)
    services.cluster_update(actor=admin, cluster=volcano, topology_levels=[BLOCK, HOST])  # HyperNodes follow


@pytest.mark.django_db
def test_a_topology_aware_flavor_keeps_its_labels_and_tolerations_on_kueue():
    from tenants import services
    from tests.factories import ClusterFactory, GpuFlavorFactory, PlatformAdminFactory

    admin = PlatformAdminFactory()
    cluster = ClusterFactory(name="east", scheduler="kueue", topology_levels=[RACK, HOST], observed_generation=1)
    flavor = GpuFlavorFactory(cluster=cluster, name="h100")
    flavor.node_labels = {"gpu-portal.io/flavor": "h100", "pool": "b"}
    with pytest.raises(ValidationError, match="Topology-Aware ResourceFlavor's nodeLabels or tolerations"):
        services.gpu_flavor_save(actor=admin, flavor=flavor)
    flavor.refresh_from_db()
    flavor.capacity = 48  # anything else may change
    services.gpu_flavor_save(actor=admin, flavor=flavor)
