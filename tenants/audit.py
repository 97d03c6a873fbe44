"""The audit trail: who changed what, when, from where, and what the row held before and after."""

from django.forms.models import model_to_dict

from .models import AuditEvent, Team


def audit_record(*, actor, action: str, obj, team: Team | None = None, before=None, after=None,
                 source_ip: str | None = None) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        action=action,
        object_type=obj._meta.model_name,
        object_id=str(obj.pk),
        object_repr=str(obj)[:200],
        team=team,
        before=before,
        after=after,
        source_ip=source_ip,
    )


def snapshot(obj, fields: list[str]) -> dict:
    data = model_to_dict(obj, fields=fields)
    return {k: (str(v) if not isinstance(v, (str, int, float, bool, type(None), dict, list)) else v)
            for k, v in data.items()}
