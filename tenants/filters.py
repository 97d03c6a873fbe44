import django_filters

from .models import AuditEvent, Team


def _actions():
    return AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()


def _object_types():
    return AuditEvent.objects.order_by("object_type").values_list("object_type", flat=True).distinct()


class AuditEventFilter(django_filters.FilterSet):
    action = django_filters.ChoiceFilter(label="Action", empty_label="any action")
    team = django_filters.ModelChoiceFilter(
        label="Team", to_field_name="slug", queryset=Team.objects.order_by("slug"), empty_label="any team",
    )

    actor = django_filters.CharFilter(label="Who", field_name="actor__username", lookup_expr="iexact")
    object_type = django_filters.ChoiceFilter(label="Object", empty_label="any object")

    class Meta:
        model = AuditEvent
        fields = ["action", "team", "actor", "object_type"]

    def __init__(self, *args, teams=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.filters["action"].extra["choices"] = [(a, a) for a in _actions()]
        self.filters["object_type"].extra["choices"] = [(t, t) for t in _object_types()]
        if teams is not None:
            self.filters["team"].queryset = teams
