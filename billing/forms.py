from datetime import UTC

from django import forms
from django.core.exceptions import ValidationError

from tenants.models import GpuFlavor

from . import selectors
from .choices import BudgetMode


class MonthField(forms.CharField):
    """YYYY-MM → the first day of that month."""

    def __init__(self, **kwargs):
        super().__init__(max_length=7, widget=forms.TextInput(attrs={"type": "month", "placeholder": "YYYY-MM"}),
                         **kwargs)

    def clean(self, value):
        value = super().clean(value)
        try:
            return selectors.parse_month(value)
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages) from None


class BudgetForm(forms.Form):
    month = MonthField()
    amount = forms.DecimalField(max_digits=14, decimal_places=2, min_value=0.01, label="Amount")
    mode = forms.ChoiceField(choices=BudgetMode.choices, initial=BudgetMode.NOTIFY, label="When spent", required=False,
                             help_text="Hold: the team's new jobs wait before admission (running jobs go on). "
                                       "Not given: as it was.")


class TeamFlavorsForm(forms.Form):
    """A form naming one of the team's flavors (`flavors`, the flavors of its clusters)."""

    def __init__(self, *args, flavors=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flavor"].queryset = flavors if flavors is not None else GpuFlavor.objects.none()
        self.fields["flavor"].label_from_instance = lambda f: f"{f.cluster.name} · {f.name}"


class AllowanceForm(TeamFlavorsForm):
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.none())
    gpu_hours = forms.DecimalField(max_digits=12, decimal_places=2, min_value=0.01, label="GPU-hours",
                                   help_text="Whole-GPU hours: an hour of a MIG slice counts its fraction of a GPU.")
    window_days = forms.IntegerField(min_value=1, max_value=366, initial=7, label="Over the last (days)",
                                     help_text="7 for a week, 30 for a month.")


class OverrideForm(TeamFlavorsForm):
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.none(), required=False,
                                    help_text="The allowance the extra GPU-hours go to.")
    extra_gpu_hours = forms.DecimalField(max_digits=12, decimal_places=2, required=False, label="Extra GPU-hours")
    extra_amount = forms.DecimalField(max_digits=14, decimal_places=2, required=False, label="Extra money",
                                      help_text="Neither: every hold of the team is lifted until the expiry.")
    expires_at = forms.DateTimeField(
        label="Until (UTC)", widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"])
    reason = forms.CharField(max_length=300)

    def clean_expires_at(self):
        return self.cleaned_data["expires_at"].astimezone(UTC)


class RateCardForm(forms.Form):
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.none())
    price = forms.DecimalField(max_digits=14, decimal_places=4, min_value=0, label="Price per GPU-hour")
    effective_from = forms.DateTimeField(
        label="Effective from (UTC, on the hour)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": 3600}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"])
    note = forms.CharField(max_length=200, required=False)

    def __init__(self, *args, flavors=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flavor"].queryset = flavors if flavors is not None else GpuFlavor.objects.none()
        self.fields["flavor"].label_from_instance = lambda f: f"{f.cluster.name} · {f.name} ({f.resource_name})"

    def clean_effective_from(self):
        # The portal runs in UTC; say so rather than guess a browser's zone.
        return self.cleaned_data["effective_from"].astimezone(UTC)
