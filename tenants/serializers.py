"""API shapes of tenancy data: output serializers name units in their fields; input serializers only parse, the
services validate."""

from rest_framework import serializers

from .choices import Role, Sharing
from .sharing import ISOLATION


class TeamRoleSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    role = serializers.ChoiceField(choices=Role.choices)


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.EmailField()
    is_platform_admin = serializers.BooleanField()
    teams = TeamRoleSerializer(many=True)


class TeamSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    namespace = serializers.CharField()
    cost_center = serializers.CharField()
    state = serializers.CharField()
    parent = serializers.CharField(source="parent.slug", allow_null=True, help_text="The department's slug.")
    created_at = serializers.DateTimeField()


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    email = serializers.EmailField(source="user.email")
    role = serializers.ChoiceField(choices=Role.choices)


class MemberInputSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)


class MemberRoleInputSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)


class ClusterSerializer(serializers.Serializer):
    name = serializers.CharField()
    display_name = serializers.CharField()
    scheduler = serializers.CharField()
    active = serializers.BooleanField()


class FlavorSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    cluster = serializers.CharField(source="cluster.name")
    name = serializers.CharField()
    resource_name = serializers.CharField()
    gpu_model = serializers.CharField()
    capacity_units = serializers.IntegerField(source="capacity")
    gpus_per_node = serializers.IntegerField()
    gpu_memory_gb = serializers.IntegerField(source="memory_gb")
    gpu_fraction = serializers.FloatField(help_text="The part of a full GPU one unit is (1/7 for a 1g MIG slice).")
    sharing = serializers.ChoiceField(choices=Sharing.choices,
                                      help_text="exclusive, mig, time_sliced, mps (device plugin) or dra.")
    replicas = serializers.IntegerField(allow_null=True, help_text="Time-slicing and MPS: shares per GPU.")
    device_class = serializers.CharField(help_text="DRA: the DeviceClass a job's claims ask for.")
    device_selector = serializers.CharField(help_text="DRA: CEL expression narrowing the class's devices.")
    isolation = serializers.SerializerMethodField(help_text="What isolation a unit of this flavor gives.")

    def get_isolation(self, flavor) -> str:
        return ISOLATION.get(flavor.sharing, "")

