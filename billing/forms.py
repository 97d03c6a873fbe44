from datetime import UTC

from django import forms
from django.core.exceptions import ValidationError

from tenants.models import GpuFlavor

from . import selectors


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
