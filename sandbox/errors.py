"""API errors rendered as kube-apiserver `Status` objects."""

from __future__ import annotations


class ApiError(Exception):
    """An error answered to the client as a `Status` body with the same wording kube-apiserver uses."""

    def __init__(self, code: int, reason: str, message: str, *, name: str | None = None, group: str | None = None,
                 kind: str | None = None, causes: list[dict] | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details: dict = {}
        if name is not None:
            self.details["name"] = name
        if group:
            self.details["group"] = group
        if kind is not None:
            self.details["kind"] = kind
        if causes:
            self.details["causes"] = causes
        if retry_after is not None:
            self.details["retryAfterSeconds"] = retry_after

    def status(self) -> dict:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(resource, group)} "{name}" not found',
                    name=name, group=group, kind=resource)


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{_qualified(resource, group)} "{name}" already exists',
                    name=name, group=group, kind=resource)


def conflict(resource: str, group: str, name: str, detail: str, causes: list[dict] | None = None) -> ApiError:
    qualified = _qualified(resource, group)
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": {detail}',
                    name=name, group=group, kind=resource, causes=causes)


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, group: str, name: str, causes: list[dict]) -> ApiError:
    """422 Invalid; `causes` are {reason, message, field} as kube-apiserver lists them; the message aggregates them
    as ErrorList.ToAggregate does: a repeated one once, several in brackets."""
    parts = list(dict.fromkeys(f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes))
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}',
                    name=name, group=group, kind=kind, causes=causes)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def method_not_allowed(verb: str, resource: str, group: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
                    group=group, kind=resource)
