"""API shapes of usage, statements and budgets. Money and GPU-hours are decimal strings (exact, never floats);
the currency is named once per document."""

from rest_framework import serializers


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
