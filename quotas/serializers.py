"""API shapes of quotas and quota requests. GPU amounts are in units of the flavor (whole GPUs, or MIG slices)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from quotas.models import MAX_CPU_CORES, MAX_MEMORY_GIB, MAX_STORAGE_GIB, MAX_UNITS

from .choices import RequestState, ReservationState


class QuotaSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="flavor.cluster.name")
    flavor = serializers.CharField(source="flavor.name")
    flavor_id = serializers.IntegerField()
    resource_name = serializers.CharField(source="flavor.resource_name")
    guaranteed_units = serializers.IntegerField(source="guaranteed")
    burst_units = serializers.IntegerField(source="burst")
    limit_units = serializers.IntegerField(source="limit")
    in_use_units = serializers.IntegerField(help_text="In use now, as the cluster last reported (Kueue: the "
                                                      "ClusterQueue's use of this flavor; else the ResourceQuota's).")
    not_applied = serializers.CharField(help_text="Why the cluster does not hold this quota as the portal does "
                                                  "(rejected, retrying, being applied, or enforcing other "
                                                  "limits); empty when it does.")
    cpu_cores = serializers.IntegerField()
    memory_gib = serializers.IntegerField()
    storage_gib = serializers.IntegerField()
    expires_at = serializers.DateTimeField(allow_null=True)


class QuotaRequestSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="flavor.cluster.name")
    flavor = serializers.CharField(source="flavor.name")
    flavor_id = serializers.IntegerField()
    guaranteed_units = serializers.IntegerField(source="guaranteed")
    burst_units = serializers.IntegerField(source="burst")
    cpu_cores = serializers.IntegerField()
    memory_gib = serializers.IntegerField()
    storage_gib = serializers.IntegerField()
    justification = serializers.CharField()
    ends_at = serializers.DateTimeField(allow_null=True)
    state = serializers.ChoiceField(choices=RequestState.choices)
    requested_by = serializers.CharField(source="requested_by.username")
    requested_at = serializers.DateTimeField()
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_note = serializers.CharField()
    granted_guaranteed_units = serializers.IntegerField(source="granted_guaranteed", allow_null=True)
    granted_burst_units = serializers.IntegerField(source="granted_burst", allow_null=True)


class QuotaRequestInputSerializer(serializers.Serializer):
    team = serializers.SlugField(max_length=63)
    flavor = serializers.CharField(max_length=63, required=False,
                                   help_text="The GPU flavor's name, as job submission takes it.")
    cluster = serializers.CharField(max_length=63, required=False,
                                    help_text="The cluster's name, when flavors of that name exist in several.")
    flavor_id = serializers.IntegerField(min_value=1, max_value=2**31 - 1, required=False,
                                         help_text="The flavor's id: still accepted, for clients written before "
                                                   "`flavor`. Give one of the two.")
    guaranteed_units = serializers.IntegerField(min_value=0, max_value=MAX_UNITS)
    burst_units = serializers.IntegerField(min_value=0, max_value=MAX_UNITS, default=0)
    cpu_cores = serializers.IntegerField(min_value=0, max_value=MAX_CPU_CORES, required=False,
                                         help_text="Defaults to 8 cores per guaranteed GPU.")
    memory_gib = serializers.IntegerField(min_value=0, max_value=MAX_MEMORY_GIB, required=False,
                                          help_text="Defaults to 64 GiB per guaranteed GPU.")
    storage_gib = serializers.IntegerField(min_value=0, max_value=MAX_STORAGE_GIB, default=0)
    ends_at = serializers.DateTimeField(required=False, allow_null=True,
                                        help_text="For a time-boxed grant: when it reverts (ISO 8601).")
    justification = serializers.CharField(min_length=10, max_length=2000)

    def validate(self, attrs):
        if ("flavor" in attrs) == ("flavor_id" in attrs):
            raise serializers.ValidationError({"flavor": ["Give the flavor's name (or, as before, flavor_id)."]})
        return attrs


class ApproveInputSerializer(serializers.Serializer):
    guaranteed_units = serializers.IntegerField(min_value=0, max_value=MAX_UNITS, required=False,
                                                help_text="Grant a different amount than asked.")
    burst_units = serializers.IntegerField(min_value=0, max_value=MAX_UNITS, required=False)
    note = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class RejectInputSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=2000, help_text="The team sees this.")


class AmountsSerializer(serializers.Serializer):
    guaranteed_units = serializers.IntegerField()
    burst_units = serializers.IntegerField()


class ShrinkingSerializer(serializers.Serializer):
    team = serializers.CharField()
    borrowable_before_units = serializers.IntegerField()
    borrowable_after_units = serializers.IntegerField()


class ImpactSerializer(serializers.Serializer):
    flavor = serializers.CharField(source="flavor.name")
    capacity_units = serializers.IntegerField(source="capacity")
    allowed_units = serializers.IntegerField(source="allowed", help_text="Capacity × the cluster's overcommit.")
    overcommit = serializers.FloatField()
    guaranteed_before_units = serializers.IntegerField(source="guaranteed_before")
    guaranteed_after_units = serializers.IntegerField(source="guaranteed_after")
    headroom_after_units = serializers.IntegerField(source="headroom_after")
    team_share_after_percent = serializers.FloatField(source="team_share_after")
    fits = serializers.BooleanField()
    current = serializers.SerializerMethodField()
    proposed = serializers.SerializerMethodField()
    shrinking = serializers.SerializerMethodField()

    def _amounts(self, pair) -> dict:
        return {"guaranteed_units": pair[0], "burst_units": pair[1]}

    @extend_schema_field(AmountsSerializer)
    def get_current(self, impact):
        return self._amounts(impact.current)

    @extend_schema_field(AmountsSerializer)
    def get_proposed(self, impact):
        return self._amounts(impact.proposed)

    @extend_schema_field(ShrinkingSerializer(many=True))
    def get_shrinking(self, impact):
        return [{"team": slug, "borrowable_before_units": before, "borrowable_after_units": after}
                for slug, before, after in impact.shrinking]


class ReservationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="flavor.cluster.name")
    flavor = serializers.CharField(source="flavor.name")
    units = serializers.IntegerField(help_text="Guaranteed on top of the team's quota over the window.")
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField(help_text="Exclusive: a window ending when another starts never overlaps it.")
    justification = serializers.CharField()
    state = serializers.ChoiceField(choices=ReservationState.choices)
    requested_by = serializers.CharField(source="requested_by.username")
    requested_at = serializers.DateTimeField()
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_note = serializers.CharField()


class ReservationInputSerializer(serializers.Serializer):
    team = serializers.SlugField(max_length=63)
    flavor = serializers.CharField(max_length=63, help_text="The GPU flavor's name, as job submission takes it.")
    cluster = serializers.CharField(max_length=63, required=False,
                                    help_text="The cluster's name, when flavors of that name exist in several.")
    units = serializers.IntegerField(min_value=1, max_value=MAX_UNITS)
    starts_at = serializers.DateTimeField(help_text="In the future (ISO 8601).")
    ends_at = serializers.DateTimeField(help_text="After starts_at.")
    justification = serializers.CharField(min_length=10, max_length=2000)


class BookInputSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class CalendarDaySerializer(serializers.Serializer):
    day = serializers.DateField()
    guaranteed_units = serializers.IntegerField(source="total", help_text="At the day's busiest instant.")
    free_units = serializers.IntegerField(source="free")
    by_team = serializers.DictField(child=serializers.IntegerField(),
                                    help_text='Team slug → units; other teams\' together as "other teams" for '
                                              "everyone but platform admins.")


class CalendarSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="flavor.cluster.name")
    flavor = serializers.CharField(source="flavor.name")
    capacity_units = serializers.IntegerField(source="flavor.capacity")
    allowed_units = serializers.IntegerField(source="allowed")
    days = CalendarDaySerializer(many=True)
