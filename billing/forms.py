from datetime import UTC

from django import forms
from django.core.exceptions import ValidationError

from backends import kueue_fairshare
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


class DurationField(forms.CharField):
    """A Go duration as Kueue's Configuration writes it ("168h", "90m", "1h30m") → seconds."""

    def __init__(self, *, minimum: float, maximum: float, **kwargs):
        self.minimum, self.maximum = minimum, maximum
        super().__init__(max_length=20, **kwargs)

    def clean(self, value):
        value = super().clean(value)
        try:
            seconds = kueue_fairshare.parse_duration(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        if not self.minimum <= seconds <= self.maximum:
            raise forms.ValidationError(
                f"must be between {kueue_fairshare.format_duration(self.minimum)} and "
                f"{kueue_fairshare.format_duration(self.maximum)}")
        return seconds


class FairSharingWhatIfForm(forms.Form):
    """Other weights or another half-life for a cluster's admission fair sharing, tried on recorded usage."""

    weeks = forms.IntegerField(min_value=1, max_value=8, initial=4, label="Weeks of recorded usage")
    half_life = DurationField(minimum=0, maximum=365 * 86400, initial="168h", label="Half-life to try",
                              help_text="usageHalfLifeTime, e.g. 168h; 0s remembers nothing")
    baseline_half_life = DurationField(minimum=0, maximum=365 * 86400, initial="0s", label="Half-life today",
                                       help_text="what the cluster's Kueue Configuration says (Kueue's default is 0s)")
    sampling = DurationField(minimum=1, maximum=86400, initial="5m", label="Sampling interval",
                             help_text="usageSamplingInterval (Kueue's default is 5m)")

    def __init__(self, *args, teams: list[tuple[str, str, int]], **kwargs):
        super().__init__(*args, **kwargs)
        self.teams = teams
        for slug, name, weight in teams:
            self.fields[f"weight_{slug}"] = forms.IntegerField(
                min_value=1, max_value=65535, initial=weight, required=False, label=f"Weight of {name}",
                widget=forms.NumberInput(attrs={"placeholder": weight}))

    @classmethod
    def from_query(cls, params, *, teams: list[tuple[str, str, int]]):
        """Bound to a query string, what it leaves out taken from the suggestions (a first visit replays them)."""
        data = {name: field.initial for name, field in cls.base_fields.items()}
        data.update({f"weight_{slug}": weight for slug, _, weight in teams})
        data.update({key: params.get(key) for key in params})
        return cls(data, teams=teams)

    def weight_fields(self):
        return [self[f"weight_{slug}"] for slug, _, _ in self.teams]

    def option_fields(self):
        return [self[name] for name in ("weeks", "half_life", "baseline_half_life", "sampling")]

    def weights(self) -> dict[str, int]:
        """The weights tried, by team slug; a team left blank (or new since the form was drawn) keeps its own."""
        return {slug: self.cleaned_data[f"weight_{slug}"] if self.cleaned_data.get(f"weight_{slug}") is not None
                else weight for slug, _, weight in self.teams}

    def settings(self) -> tuple[kueue_fairshare.Settings, kueue_fairshare.Settings]:
        """(proposed, today's)."""
        data = self.cleaned_data
        return (kueue_fairshare.Settings(half_life=data["half_life"], sampling=data["sampling"]),
                kueue_fairshare.Settings(half_life=data["baseline_half_life"], sampling=data["sampling"]))
