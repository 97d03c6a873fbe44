import django_filters

from .models import AuditEvent, Team


def _actions():
    return AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()


class AuditEventFilter(django_filters.FilterSet):
    action = django_filters.ChoiceFilter(label="Action", empty_label="any action")
    team = django_filters.ModelChoiceFilter(
        label="Team", to_field_name="slug", queryset=Team.objects.order_by("slug"), empty_label="any team",
    )

    class Meta:
        model = AuditEvent
        fields = ["action", "team"]

    def __init__(self, *args, teams=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.filters["action"].extra["choices"] = [(a, a) for a in _actions()]
        if teams is not None:
            self.filters["team"].queryset = teams
