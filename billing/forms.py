from datetime import UTC, datetime, time, timedelta

from django import forms
from django.core.exceptions import ValidationError

from backends import kueue_fairshare
from tenants.models import GpuFlavor

from . import selectors
from .choices import BudgetMode, ScrapeShape


def usage_source_fields() -> dict[str, forms.Field]:
    """A cluster's usage source settings, on the cluster's registration form and admin page (tenants.cluster_parts)."""
    return {
        "prometheus_url": forms.URLField(required=False, assume_scheme="https", label="Prometheus URL"),
        "scrape_shape": forms.ChoiceField(
            choices=ScrapeShape.choices, required=False, label="Scrape shape",
            help_text="The dcgm-exporter ServiceMonitor's honorLabels; left to detection, either is read."),
    }


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


class UsageRangeForm(forms.Form):
    """The usage explorer's range: whole UTC days, both ends included, at most MAX_DAYS, none in the future. Empty,
    it is the last 7 days; flavor and job say how far the explorer has drilled down, and `by=gpu` that it shows the
    job's GPUs one by one rather than its hours."""

    MAX_DAYS = 92
    start = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    flavor = forms.CharField(required=False, max_length=63, widget=forms.HiddenInput)
    job = forms.CharField(required=False, max_length=20, widget=forms.HiddenInput)
    by = forms.ChoiceField(required=False, choices=[("", "hour"), ("gpu", "GPU")], widget=forms.HiddenInput)

    def __init__(self, data, *, today):
        super().__init__(data)
        self.today = today

    def clean(self):
        data = super().clean()
        end = data.get("end") or self.today
        start = data.get("start") or end - timedelta(days=6)
        if end > self.today:
            self.add_error("end", "The range cannot end after today (UTC).")
        elif start > end:
            self.add_error("start", "The range must start on or before its last day.")
        elif (end - start).days + 1 > self.MAX_DAYS:
            self.add_error("start", f"At most {self.MAX_DAYS} days at once; pick a later first day.")
        data["start"], data["end"] = start, end
        return data

    def bounds(self) -> tuple[datetime, datetime]:
        """[first day 00:00, the day after the last 00:00) in UTC."""
        first = datetime.combine(self.cleaned_data["start"], time.min, tzinfo=UTC)
        return first, datetime.combine(self.cleaned_data["end"], time.min, tzinfo=UTC) + timedelta(days=1)
