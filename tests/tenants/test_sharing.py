"""A flavor's sharing mode: the fields each mode needs, what a share is worth, and the console form's errors.

Facts from k8s-device-plugin v0.20.0 (api/config/v1/replicas.go: replicas at least 2; consts.go: the `.shared`
suffix; cmd/mps-control-daemon/mps/daemon.go: MPS limits) and k8s-dra-driver-gpu v25.12.0 (DeviceClass names).
"""

from fractions import Fraction

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from backends.kueue import kueue_mapping
from tenants.choices import Sharing
from tenants.models import GpuFlavor
from tenants.sharing import mps_limits, plugin_config
from tests.factories import ClusterFactory, GpuFlavorFactory

pytestmark = pytest.mark.django_db
H100_SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


def _errors(flavor) -> dict:
    with pytest.raises(ValidationError) as caught:
        flavor.full_clean()
    return caught.value.message_dict


def test_a_shared_flavor_is_its_replicas_share_of_a_gpu():
    flavor = GpuFlavorFactory.build(cluster=ClusterFactory(), sharing=Sharing.MPS, replicas=4,
                                    resource_name="nvidia.com/gpu.shared", capacity=32, memory_gb=80)
    flavor.full_clean()
    assert flavor.fraction == Fraction(1, 4)
    assert str(flavor.gpu_fraction) == "0.2500"
    assert mps_limits(flavor) == {"thread_percentage": 25, "memory_mib": 20480}
    assert plugin_config(flavor) == {"version": "v1", "sharing": {"mps": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "renameByDefault": True}}}
    sliced = GpuFlavorFactory.build(cluster=flavor.cluster, sharing=Sharing.TIME_SLICED, replicas=3)
    sliced.full_clean()
    assert sliced.fraction == Fraction(1, 3)
    assert plugin_config(sliced)["sharing"] == {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu",
                                                                               "replicas": 3}]}}
    assert mps_limits(sliced) == {}


@pytest.mark.parametrize(("fields", "field", "says"), [
    ({"sharing": Sharing.TIME_SLICED}, "replicas", "replicas per GPU"),
    ({"sharing": Sharing.MPS, "replicas": 1}, "replicas", "greater than or equal to 2"),
    ({"sharing": Sharing.MPS, "replicas": 2, "resource_name": "nvidia.com/mig-1g.10gb"}, "resource_name",
     "nvidia.com/gpu.shared"),
    ({"sharing": Sharing.EXCLUSIVE, "replicas": 4}, "replicas", "Only time-sliced and MPS"),
    ({"sharing": Sharing.DRA, "resource_name": "gpu.nvidia.com/devices"}, "device_class", "names the DeviceClass"),
    ({"sharing": Sharing.DRA, "device_class": "gpu.nvidia.com"}, "resource_name", "not a device plugin resource"),
    ({"sharing": Sharing.DRA, "device_class": "GPU_class", "resource_name": "gpu.nvidia.com/devices"},
     "device_class", "DNS subdomain"),
    ({"sharing": Sharing.DRA, "device_class": "gpu.nvidia.com", "resource_name": "gpu.nvidia.com/devices",
      "device_selector": "device.attributes['gpu.nvidia.com'].productName =="}, "device_selector",
     "Not a CEL expression"),
    ({"sharing": Sharing.DRA, "device_class": "gpu.nvidia.com", "resource_name": "gpu.nvidia.com/devices",
      "device_selector": "true"}, "device_selector", "tests the device"),
    ({"sharing": Sharing.DRA, "device_class": "gpu.nvidia.com", "resource_name": "gpu.nvidia.com/devices",
      "device_selector": "device.driver == '" + "x" * 10240 + "'"}, "device_selector", "at most 10240"),
    ({"device_class": "gpu.nvidia.com"}, "device_class", "Only DRA flavors"),
])
def test_each_mode_refuses_what_it_cannot_schedule(fields, field, says):
    flavor = GpuFlavorFactory.build(cluster=ClusterFactory(), **fields)
    errors = _errors(flavor)
    assert field in errors, errors
    assert says.lower() in " ".join(errors[field]).lower()


def test_a_dra_flavor_names_its_class_and_kueue_resource():
    flavor = GpuFlavorFactory.build(cluster=ClusterFactory(), sharing=Sharing.DRA, device_class="gpu.nvidia.com",
                                    resource_name="gpu.nvidia.com/devices", device_selector=H100_SELECTOR)
    flavor.full_clean()
    assert kueue_mapping(flavor) == {"name": "gpu.nvidia.com/devices", "deviceClassNames": ["gpu.nvidia.com"]}


def test_console_form_shows_each_bad_field_and_saves_nothing(admin_client):
    cluster = ClusterFactory()
    url = reverse("quotas:flavor-create")
    base = {"cluster": cluster.pk, "name": "h100-dra", "capacity": 8, "gpus_per_node": 8, "memory_gb": 80,
            "gpu_fraction": "1", "node_labels": "{}", "node_taints": "[]", "tolerations": "[]"}
    bad = {**base, "sharing": "dra", "resource_name": "nvidia.com/gpu", "device_class": "Not A Class",
           "device_selector": "device.attributes[", "replicas": "0"}
    page = admin_client.post(url, bad).content.decode()
    for message in ("DNS subdomain", "greater than or equal to 2"):
        assert message in page
    assert not GpuFlavor.objects.filter(name="h100-dra").exists()
    bad = {**base, "sharing": "dra", "resource_name": "nvidia.com/gpu", "device_class": "gpu.nvidia.com",
           "device_selector": "device.attributes["}
    page = admin_client.post(url, bad).content.decode()
    assert "not a device plugin resource" in page and "Not a CEL expression" in page
    good = {**base, "sharing": "dra", "resource_name": "gpu.nvidia.com/devices", "device_class": "gpu.nvidia.com",
            "device_selector": H100_SELECTOR}
    assert admin_client.post(url, good).status_code == 302
    saved = GpuFlavor.objects.get(name="h100-dra")
    assert (saved.device_class, saved.device_selector) == ("gpu.nvidia.com", H100_SELECTOR)
    shared = {**base, "name": "t4-shared", "sharing": "time_sliced", "resource_name": "nvidia.com/gpu.shared",
              "replicas": "", "node_labels": '{"pool": "t4"}'}
    assert "replicas per GPU" in admin_client.post(url, shared).content.decode()
    assert admin_client.post(url, {**shared, "replicas": "4"}).status_code == 302
    assert GpuFlavor.objects.get(name="t4-shared").fraction == Fraction(1, 4)


@pytest.mark.parametrize(("scheduler", "says"), [
    ("kueue", ["deviceClassMappings:", "name: gpu.nvidia.com/devices", "- gpu.nvidia.com",
               "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"]),
    ("volcano", ["capacity.DynamicResourceAllocationEnable: true", "deviceclass/gpu.nvidia.com"]),
])
def test_console_says_what_each_clusters_controllers_need(admin_client, scheduler, says):
    flavor = GpuFlavorFactory(cluster=ClusterFactory(scheduler=scheduler), sharing=Sharing.DRA,
                              device_class="gpu.nvidia.com", resource_name="gpu.nvidia.com/devices")
    page = admin_client.get(reverse("quotas:flavor-edit", args=[flavor.pk])).content.decode()
    for text in [*says, "No isolation", "Limits, not walls", "Hardware isolation"]:
        assert text in page, text


def test_console_shows_an_mps_flavors_plugin_config_and_limits(admin_client):
    flavor = GpuFlavorFactory(cluster=ClusterFactory(), sharing=Sharing.MPS, replicas=4, memory_gb=16,
                              resource_name="nvidia.com/gpu.shared")
    page = admin_client.get(reverse("quotas:flavor-edit", args=[flavor.pk])).content.decode()
    assert "mps:" in page and "replicas: 4" in page and "renameByDefault: true" in page
    assert "25% of the SMs" in page and "4096 MiB of device memory" in page
