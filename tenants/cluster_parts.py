"""Cluster settings that apps above tenancy keep in their own one-to-one tables (billing's usage source).

A cluster is registered, changed, audited and shown as one thing, but this layer does not know those apps: each
registers a `ClusterPart` from its AppConfig.ready(), and the cluster's services, forms, admin page and selectors
take the part's fields, values and relation from here.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django import forms


@dataclass(frozen=True)
class ClusterPart:
    related_name: str  # the one-to-one's name on Cluster: selected with a cluster shown on its page
    form_fields: Callable[[], dict[str, forms.Field]]  # every setting the part keeps, as form fields, in order
    registration_fields: tuple[str, ...]  # of those, the ones asked when a cluster is registered on the console
    values: Callable[..., dict]  # values(cluster) → what the part holds now (audit record, form initial values)
    save: Callable[..., None]  # save(cluster=, **values): the part's row of a new or changed cluster, validated


_parts: list[ClusterPart] = []


def register(part: ClusterPart) -> None:
    if all(p.related_name != part.related_name for p in _parts):
        _parts.append(part)


def parts() -> list[ClusterPart]:
    return list(_parts)


def related_names() -> list[str]:
    return [part.related_name for part in _parts]


def field_names(*, registration: bool = False) -> list[str]:
    return [name for part in _parts for name in (part.registration_fields if registration else part.form_fields())]


def form_fields(*, registration: bool = False) -> dict[str, forms.Field]:
    chosen = set(field_names(registration=registration))
    return {name: field for part in _parts for name, field in part.form_fields().items() if name in chosen}


def split(fields: dict) -> tuple[dict, dict[str, dict]]:
    """A cluster write's fields: the cluster's own, and each part's (by related name)."""
    own, by_part = dict(fields), {}
    for part in _parts:
        by_part[part.related_name] = {name: own.pop(name) for name in part.form_fields() if name in own}
    return own, by_part


def save(*, cluster, by_part: dict[str, dict], created: bool) -> None:
    """A new cluster gets every part's row (defaults where nothing was given); a change saves the parts it names."""
    for part in _parts:
        values = by_part.get(part.related_name, {})
        if created or values:
            part.save(cluster=cluster, **values)


def snapshot(cluster) -> dict:
    return {name: value for part in _parts for name, value in part.values(cluster).items()}
