"""One MIG flavor definition (GPU model + profile) schedules under both of the GPU Operator's MIG strategies.

Under `mixed` the device plugin advertises nvidia.com/mig-<profile>; under `single` every slice is an nvidia.com/gpu
on a node GPU Feature Discovery labels nvidia.com/gpu.product=<model with dashes>-MIG-<profile>
(k8s-device-plugin internal/lm/mig-strategy.go and resource.go).
"""

from decimal import Decimal
from fractions import Fraction

import pytest
from django.core.exceptions import ValidationError

from jobs.models import Job
from jobs.selectors import job_desired
from quotas.desired import cluster_quota_objects, team_quota_objects
from quotas.models import Quota
from tenants.choices import Sharing
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
A100 = "NVIDIA A100-SXM4-80GB"
PRODUCT = "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"


def _world(strategy):
    cluster = ClusterFactory(name=f"mig-{strategy}", mig_strategy=strategy)
    whole = GpuFlavorFactory(cluster=cluster, name="a100", gpu_model=A100,
                             node_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    mig = GpuFlavorFactory(cluster=cluster, name="a100-1g", gpu_model=A100, sharing=Sharing.MIG,
                           resource_name="nvidia.com/mig-1g.10gb", gpu_fraction=Decimal("0.1429"), gpus_per_node=56,
                           node_labels={})
    team = TeamFactory(slug="vision")
    TeamNamespaceFactory(team=team, cluster=cluster)
    Quota.objects.create(team=team, flavor=mig, guaranteed=7, burst=7)
    Quota.objects.create(team=team, flavor=whole, guaranteed=2)
    return cluster, whole, mig, team


def _kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize(("strategy", "resource", "labels"), [
    ("mixed", "nvidia.com/mig-1g.10gb", {}),
    ("single", "nvidia.com/gpu", {"nvidia.com/gpu.product": PRODUCT}),
])
def test_quota_and_job_objects_use_the_strategys_resource_and_nodes(strategy, resource, labels):
    cluster, whole, mig, team = _world(strategy)
    assert (mig.mig_profile, mig.fraction) == ("1g.10gb", Fraction(1, 7))
    assert (mig.scheduled_resource(strategy), mig.scheduled_node_labels(strategy)) == (resource, labels)

    objects = team_quota_objects(team=team, cluster=cluster, quotas=list(team.quotas.select_related("flavor")),
                                 flavors=list(cluster.flavors.order_by("name")))
    hard = _kind(objects, "ResourceQuota")[0]["spec"]["hard"]
    if strategy == "single":  # the slices and the whole GPUs share nvidia.com/gpu: their caps add up
        assert hard["requests.nvidia.com/gpu"] == "16" and "requests.nvidia.com/mig-1g.10gb" not in hard
    else:
        assert (hard["requests.nvidia.com/gpu"], hard["requests.nvidia.com/mig-1g.10gb"]) == ("2", "14")
    groups = _kind(objects, "ClusterQueue")[0]["spec"]["resourceGroups"]
    covering = [g for g in groups if resource in g["coveredResources"]]
    assert len(covering) == 1 and "a100-1g" in [f["name"] for f in covering[0]["flavors"]]

    flavors = {o["metadata"]["name"]: o for o in _kind(cluster_quota_objects(cluster=cluster, tiers=[]),
                                                       "ResourceFlavor")}
    assert flavors["a100-1g"]["spec"].get("nodeLabels", {}) == labels

    job = Job.objects.create(team=team, cluster=cluster, flavor=mig, priority_tier=PriorityTierFactory(),
                             kind="batch", name="infer", image="ghcr.io/acme/infer:1", submitted_by=UserFactory(),
                             gpus_per_worker=2)
    (manifest,) = job_desired(job=job)
    pod = manifest["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"][resource] == "2"
    assert pod.get("nodeSelector", {}) == labels


def test_a_mig_flavor_is_named_by_its_profile_and_its_fraction_is_exact():
    cluster = ClusterFactory()
    flavor = GpuFlavorFactory.build(cluster=cluster, name="bad", sharing=Sharing.MIG, resource_name="nvidia.com/gpu")
    with pytest.raises(ValidationError, match="nvidia.com/mig-<profile>"):
        flavor.clean()
    wrong = GpuFlavorFactory.build(cluster=cluster, name="a30-1g", sharing=Sharing.MIG, mig_slices_per_gpu=4,
                                   resource_name="nvidia.com/mig-1g.6gb", gpu_fraction=Decimal("0.1429"))
    with pytest.raises(ValidationError, match="is 1/4"):
        wrong.clean()
    wrong.gpu_fraction = Decimal("0.25")
    wrong.clean()
    assert wrong.fraction == Fraction(1, 4)


@pytest.mark.parametrize(("strategy", "resource"), [("mixed", "nvidia.com/mig-1g.10gb"), ("single", "nvidia.com/gpu")])
def test_in_use_is_read_under_the_resource_the_strategy_schedules(strategy, resource):
    from quotas.selectors import in_use

    _, _, mig, _ = _world(strategy)
    status = {"used": {resource: 3}}
    assert in_use(flavor=mig, scheduler="volcano", quota_status=status) == 3
    assert in_use(flavor=mig, scheduler="kueue", quota_status={"flavors": {"a100-1g": {resource: 5}}}) == 5
