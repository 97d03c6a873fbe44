"""The job list's filters, defined once for the jobs page and the API.

`JobFilter` validates the query (its form also renders the page's filter bar) and names, per filter, the field
it reads and the lookup it applies. jobs.selectors applies those definitions twice from that metadata: as ORM
lookups on job_list, and as conditions of the keyset SELECT the API's pages are read with.
"""

from datetime import UTC

import django_filters
from django import forms

from .choices import JobKind, JobState
from .models import Job


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """ISO-8601 with any offset Python accepts, handed to the database in UTC (PostgreSQL refuses offsets
    beyond ±15:59 that Python parses)."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return None
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError("Enter a date and time between the years 1 and 9999.", code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class JobFilter(django_filters.FilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text="A team's slug")
    state = django_filters.ChoiceFilter(choices=JobState.choices, empty_label="any state", label="State")
    kind = django_filters.ChoiceFilter(choices=JobKind.choices, empty_label="any kind", label="Kind")
    # The page offers the known names (datalists named by `list`) and matches them in any case (jobs.views).
    user = django_filters.CharFilter(field_name="submitted_by__username", help_text="The submitter's username",
                                     label="Submitted by", widget=forms.TextInput(attrs={
                                         "list": "known-users", "placeholder": "anyone", "autocomplete": "off"}))
    flavor = django_filters.CharFilter(field_name="flavor__name", label="Flavor", widget=forms.TextInput(attrs={
        "list": "known-flavors", "placeholder": "any flavor", "autocomplete": "off"}))
    cluster = django_filters.CharFilter(field_name="cluster__name")
    submitted_after = UtcIsoDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = UtcIsoDateTimeFilter(field_name="submitted_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields = []

    def values(self) -> dict:
        """The filters given, by name, once the query is valid."""
        return {name: value for name, value in self.form.cleaned_data.items() if value not in (None, "")}


def filter_lookup(name: str) -> tuple[str, str]:
    """A filter's (field path from Job, lookup), e.g. ("submitted_at", "gte")."""
    definition = JobFilter.base_filters[name]
    return definition.field_name, definition.lookup_expr
