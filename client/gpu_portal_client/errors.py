"""Typed errors carrying the API's own words: `code`, `message` and, for bad input, `fields`."""

from __future__ import annotations


class PortalError(Exception):
    """Any error answer from the portal (or no answer at all: status 0)."""

    def __init__(self, status: int, code: str, message: str, fields: dict[str, list[str]] | None = None):
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or {}
        detail = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in self.fields.items())
        super().__init__(f"{status} {code}: {message}" + (f" ({detail})" if detail else ""))


class ValidationError(PortalError):
    """400: the input was refused; `fields` says which field and why."""


class AuthenticationError(PortalError):
    """401: no token, or a token that is unknown, expired or revoked."""


class PermissionDenied(PortalError):
    """403: your role in the team does not allow this."""


class NotFound(PortalError):
    """404: no such object among those you can see."""


class RateLimited(PortalError):
    """429: too many requests for this token; `retry_after` is in seconds."""

    retry_after: float = 0.0


class ServerError(PortalError):
    """5xx, or the portal could not be reached."""


class JobFailed(PortalError):
    """Raised by Job.wait(raise_on_failure=True) when the job ends in failed or cancelled."""


BY_STATUS = {400: ValidationError, 401: AuthenticationError, 403: PermissionDenied, 404: NotFound, 429: RateLimited}


def error_for(status: int, body: object) -> PortalError:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {"code": "error", "message": str(body)[:500] or f"HTTP {status}"}
    cls = BY_STATUS.get(status, ServerError if status >= 500 or status == 0 else PortalError)
    return cls(status, str(error.get("code", "error")), str(error.get("message", "")), error.get("fields") or {})
