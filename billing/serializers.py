"""API shapes of usage, statements and budgets. Money and GPU-hours are decimal strings (exact, never floats);
the currency is named once per document."""

from rest_framework import serializers

from .choices import BudgetMode, HoldKind


class UsageDaySerializer(serializers.Serializer):
    day = serializers.DateField()
    flavor = serializers.CharField()
    allocated_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=4)
    used_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=4,
                                              help_text="Allocated GPU-hours weighted by measured utilisation.")


class UsageSerializer(serializers.Serializer):
    team = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField(help_text="Exclusive.")
    days = UsageDaySerializer(many=True)


class PeriodSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class SignalSpanSerializer(serializers.Serializer):
    signal = serializers.CharField(help_text="The dcgm-exporter field used GPU-hours were read from: "
                                             "DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_GR_ENGINE_ACTIVE or "
                                             "DCGM_FI_DEV_GPU_UTIL ('' for hours collected before it was recorded).")
    label = serializers.CharField()
    time_based = serializers.BooleanField(help_text="True when the field counts the time any kernel ran, so a loop "
                                                    "of tiny kernels reads as busy; only SM activity is not.")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(help_text="Exclusive.")


class StatementLineSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    flavor = serializers.CharField()
    resource = serializers.CharField()
    charge_period = PeriodSerializer()
    unit_price = serializers.CharField(allow_null=True, help_text="Price per GPU-hour; null when no rate applies.")
    price_from = serializers.CharField()
    allocated_gpu_hours = serializers.CharField()
    used_gpu_hours = serializers.CharField()
    efficiency = serializers.CharField(allow_null=True)
    cost = serializers.CharField()
    idle_cost = serializers.CharField()
    utilisation_signal = serializers.CharField(help_text="The field used GPU-hours were read from; when it changed "
                                                         "within the line, each field with its hours "
                                                         "(`FIELD start/end; …`).")
    utilisation_signals = SignalSpanSerializer(many=True)


class StatementTotalsSerializer(serializers.Serializer):
    allocated_gpu_hours = serializers.CharField()
    used_gpu_hours = serializers.CharField()
    cost = serializers.CharField()
    idle_cost = serializers.CharField()
    unpriced_gpu_hours = serializers.CharField()


class MissingHoursSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    state = serializers.CharField()
    message = serializers.CharField()


class StatementSerializer(serializers.Serializer):
    team = serializers.CharField()
    team_name = serializers.CharField()
    cost_center = serializers.CharField()
    department = serializers.CharField(allow_null=True)
    month = serializers.CharField(help_text="YYYY-MM")
    state = serializers.CharField()
    currency = serializers.CharField()
    billing_period = PeriodSerializer()
    lines = StatementLineSerializer(many=True)
    totals = StatementTotalsSerializer()
    utilisation_signals = SignalSpanSerializer(many=True, help_text="Every signal of the month, in time order: more "
                                                                    "than one means the cluster's exporter changed.")
    missing_hours = MissingHoursSerializer(many=True)


class HoldSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=HoldKind.choices)
    flavor = serializers.CharField(allow_null=True, help_text="null: every flavor (the money budget).")
    used = serializers.DecimalField(max_digits=20, decimal_places=6)
    limit = serializers.DecimalField(max_digits=20, decimal_places=6)
    over_by = serializers.DecimalField(max_digits=20, decimal_places=6)
    unit = serializers.CharField(help_text="The budget's currency, or GPU-hours.")
    sentence = serializers.CharField()
    who_lifts = serializers.CharField()


class AllowanceUseSerializer(serializers.Serializer):
    flavor = serializers.CharField(source="allowance.flavor.name")
    window_days = serializers.IntegerField(source="allowance.window_days")
    window_start = serializers.DateTimeField(source="start")
    gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=6, source="limit",
                                         help_text="The allowance with overrides in force.")
    used_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=6, source="used.gpu_hours")
    used_cost = serializers.DecimalField(max_digits=14, decimal_places=2, source="used.cost")
    percent = serializers.DecimalField(max_digits=8, decimal_places=1)
    spent = serializers.BooleanField()


class BudgetSerializer(serializers.Serializer):
    team = serializers.CharField()
    month = serializers.CharField(help_text="YYYY-MM")
    currency = serializers.CharField()
    amount = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True,
                                      help_text="The month's budget; null when none is set.")
    spent = serializers.DecimalField(max_digits=14, decimal_places=2)
    forecast = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="Projected spend by month end.")
    percent = serializers.DecimalField(max_digits=8, decimal_places=1, allow_null=True)
    forecast_percent = serializers.DecimalField(max_digits=8, decimal_places=1, allow_null=True)
    mode = serializers.ChoiceField(choices=BudgetMode.choices, allow_null=True,
                                   help_text="notify: alerts only; hold: new work is held once the budget is spent.")
    held = serializers.BooleanField(help_text="Whether the team's new jobs are held now.")
    held_since = serializers.DateTimeField(allow_null=True)
    holds = HoldSerializer(many=True)
    allowances = AllowanceUseSerializer(many=True)


class EvidenceHourSerializer(serializers.Serializer):
    hour = serializers.DateTimeField()
    guaranteed_units = serializers.IntegerField()
    allocated_units = serializers.DecimalField(max_digits=20, decimal_places=6,
                                               help_text="Units held on average over the hour.")
    borrowed_units = serializers.DecimalField(max_digits=20, decimal_places=6)
    quota_waiting_units = serializers.DecimalField(max_digits=20, decimal_places=6,
                                                   help_text="Units the team's jobs waited for quota, on average.")


class WaitsSerializer(serializers.Serializer):
    quota = serializers.DecimalField(max_digits=20, decimal_places=6)
    placement = serializers.DecimalField(max_digits=20, decimal_places=6)
    budget = serializers.DecimalField(max_digits=20, decimal_places=6)


class EvidenceSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="flavor.cluster.name")
    flavor = serializers.CharField(source="flavor.name")
    gpu_fraction = serializers.DecimalField(max_digits=6, decimal_places=4, source="fraction",
                                            help_text="The part of a whole GPU one unit is: GPU-hours are "
                                                      "unit-hours × this.")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(help_text="Exclusive; the window is the 30 days of whole hours before it.")
    sentence = serializers.CharField()
    guaranteed_units = serializers.IntegerField(source="guaranteed_now")
    burst_units = serializers.IntegerField(source="burst_now")
    allocated_unit_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    used_unit_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    allocated_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    used_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    borrowed_unit_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    p50_allocated_units = serializers.DecimalField(max_digits=20, decimal_places=6, source="p50_units")
    p95_allocated_units = serializers.DecimalField(max_digits=20, decimal_places=6, source="p95_units")
    idle_unit_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    idle_share = serializers.DecimalField(max_digits=6, decimal_places=4)
    idle_cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    currency = serializers.CharField()
    unpriced_hours = serializers.IntegerField()
    waited_unit_hours = WaitsSerializer()
    waited_gpu_hours = WaitsSerializer()
    extra_units = serializers.IntegerField(help_text="The fewest more guaranteed units that would have taken 80 % "
                                                     "of the quota waits off.")
    quota_waits_after_extra_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    recommended_guaranteed_units = serializers.IntegerField(source="recommended_guaranteed")
    hours = serializers.SerializerMethodField()

    def get_hours(self, evidence) -> list[dict]:
        return EvidenceHourSerializer([
            {"hour": h, "guaranteed_units": g, "allocated_units": a, "borrowed_units": b, "quota_waiting_units": w}
            for h, g, a, b, w in zip(evidence.hours, evidence.guaranteed, evidence.allocated, evidence.borrowed,
                                     evidence.quota_waiting, strict=True)], many=True).data


class FairSharingTeamSerializer(serializers.Serializer):
    team = serializers.CharField(source="slug")
    place = serializers.IntegerField(help_text="1 is served first among LocalQueues sharing a ClusterQueue.")
    weight = serializers.IntegerField()
    decayed_usage = serializers.FloatField(source="consumed", help_text="GPU units, decayed, all resources together.")
    usage_per_weight = serializers.FloatField(source="usage")
    share = serializers.FloatField(help_text="Part of all teams' usage ÷ weight, 0 to 1.")
    place_today = serializers.IntegerField(source="place_now")
    weight_today = serializers.IntegerField(source="weight_now")
    decayed_usage_today = serializers.FloatField(source="consumed_now")
    usage_per_weight_today = serializers.FloatField(source="usage_now")
    share_today = serializers.FloatField(source="share_now")


class FairSharingWhatIfSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(help_text="Exclusive.")
    recorded_hours = serializers.IntegerField()
    teams = FairSharingTeamSerializer(many=True, help_text="In the order tried.")


class RecommendationSerializer(serializers.Serializer):
    team = serializers.CharField(source="evidence.team.slug")
    cluster = serializers.CharField(source="evidence.flavor.cluster.name")
    flavor = serializers.CharField(source="evidence.flavor.name")
    guaranteed_units = serializers.IntegerField(source="evidence.guaranteed_now")
    p95_allocated_units = serializers.DecimalField(max_digits=20, decimal_places=6, source="evidence.p95_units")
    idle_share = serializers.DecimalField(max_digits=6, decimal_places=4, source="evidence.idle_share")
    quota_waits_gpu_hours = serializers.SerializerMethodField()
    recommended_guaranteed_units = serializers.IntegerField(source="recommended")
    change_units = serializers.IntegerField(source="delta")
    monthly_cost_change = serializers.DecimalField(max_digits=20, decimal_places=2, allow_null=True,
                                                   help_text="A month (730 h) of the change at today's rate; null "
                                                             "when the flavor has no rate.")
    currency = serializers.CharField(source="evidence.currency")
    verdict = serializers.ChoiceField(choices=["over-provisioned", "under-provisioned", "right-sized"])

    def get_quota_waits_gpu_hours(self, row) -> str:
        return f"{row.evidence.waited_gpu_hours['quota']:.6f}"
