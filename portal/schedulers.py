"""Which backend answers for a batch scheduler: a registry that the `backends` package fills, one object per
scheduler (the protocol is `backends.base.Backend`). It sits on the ground floor, as `portal.desired` does for
contributions, so that any layer may ask a cluster's backend; this module imports no app."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

_backends: dict[str, Any] = {}


def register(backend):
    """Idempotent per name: a reloaded module replaces its backend rather than adding a second one."""
    _backends[backend.name] = backend
    return backend


def backend_for(cluster_or_name):
    """The backend of a cluster row (or of a scheduler name)."""
    name = cluster_or_name if isinstance(cluster_or_name, str) else cluster_or_name.scheduler
    try:
        return _backends[name]
    except KeyError:
        raise ImproperlyConfigured(f"No scheduler backend is registered as {name!r}: is `backends` in "
                                   "INSTALLED_APPS?") from None


def backends() -> list:
    return list(_backends.values())
