import pytest
from django.core.exceptions import ValidationError

from tenants.models import validate_team_slug
from tests.factories import ClusterFactory, GpuFlavorFactory, TeamFactory


@pytest.mark.parametrize("slug", ["nlp", "ml-research", "a", "a" * 63, "team-42"])
def test_valid_slugs(slug):
    validate_team_slug(slug)


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        ("Bad_Slug", "lowercase"),
        ("-lead", "lowercase"),
        ("trail-", "lowercase"),
        ("a" * 64, "At most 63"),
        ("default", "reserved"),
        ("kube-system", "reserved"),
        ("kube-anything", "reserved"),
        ("", "lowercase"),
    ],
)
def test_invalid_slugs(slug, message):
    with pytest.raises(ValidationError, match=message):
        validate_team_slug(slug)


def test_slug_limit_leaves_room_for_the_namespace_prefix(settings):
    settings.NAMESPACE_PREFIX = "team-"
    with pytest.raises(ValidationError, match="At most 58"):
        validate_team_slug("a" * 59)
    validate_team_slug("a" * 58)
    settings.NAMESPACE_PREFIX = ""
    with pytest.raises(ValidationError, match="reserved"):
        validate_team_slug("default")


@pytest.mark.django_db
def test_team_namespace_uses_the_prefix(settings):
    settings.NAMESPACE_PREFIX = "t-"
    assert TeamFactory(slug="nlp").namespace == "t-nlp"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "error_field"),
    [
        ({"node_labels": {"a": 1}}, "node_labels"),
        ({"node_labels": {f"k{i}": "v" for i in range(9)}}, "node_labels"),
        ({"node_taints": [{"key": "x"}]}, "node_taints"),
        # Pods carry these as nodeSelector/tolerations; kube-apiserver's ValidateLabels and ValidateTolerations
        # (pkg/apis/core/validation/validation.go) would refuse them.
        ({"node_labels": {"gpu type": "a100"}}, "node_labels"),
        ({"node_labels": {"gpu": "NVIDIA A100"}}, "node_labels"),
        ({"node_taints": [{"key": "spot", "value": "yes please", "effect": "NoSchedule"}]}, "node_taints"),
        ({"node_taints": [{"key": "a/b/c", "effect": "NoSchedule"}]}, "node_taints"),
        ({"tolerations": [{"key": "spot", "operator": "Exists", "value": "true"}]}, "tolerations"),
        ({"tolerations": [{"operator": "Equal", "value": "x"}]}, "tolerations"),
        ({"tolerations": [{"key": "spot", "operator": "In"}]}, "tolerations"),
        ({"tolerations": [{"key": "spot", "effect": "NoSchedule", "tolerationSeconds": 5}]}, "tolerations"),
        ({"resource_name": "gpu"}, "resource_name"),
        ({"sharing": "mig", "resource_name": "nvidia.com/gpu"}, "resource_name"),
        ({"gpus_per_node": 0}, "gpus_per_node"),
    ],
)
def test_flavor_validation(fields, error_field):
    flavor = GpuFlavorFactory.build(cluster=ClusterFactory(), **fields)
    with pytest.raises(ValidationError) as info:
        flavor.full_clean()
    assert error_field in info.value.message_dict


@pytest.mark.django_db
def test_a_sandbox_cluster_needs_a_server():
    with pytest.raises(ValidationError) as info:
        ClusterFactory.build(server="").full_clean()
    assert "server" in info.value.message_dict


@pytest.mark.django_db
def test_flavor_labels_taints_and_tolerations_the_api_server_accepts():
    flavor = GpuFlavorFactory.build(
        cluster=ClusterFactory(), node_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "pool": ""},
        node_taints=[{"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"},
                     {"key": "spot", "effect": "NoExecute"}],
        tolerations=[{"operator": "Exists"}, {"key": "spot", "operator": "Exists", "effect": "NoExecute",
                                              "tolerationSeconds": 60}])
    flavor.full_clean()
