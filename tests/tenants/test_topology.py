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
