"""What every endpoint of /api/v1 shares: the one error shape, pagination and throttling (the token
authentication is the tenancy app's: tenants/authentication.py).

Errors always look like {"error": {"code": "...", "message": "...", "fields": {"field": ["message", ...]}}},
whether DRF, a selector (404), a role check (403) or a service's ValidationError raised them.
"""

import logging
import sys
import time
from datetime import UTC, datetime

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError
from django.http import Http404, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.utils.urls import remove_query_param

from portal.errors import Conflict
from portal.limits import NO_NUL

log = logging.getLogger(__name__)

# --- errors --------------------------------------------------------------------------------------------------

STATUS_CODES = {
    status.HTTP_400_BAD_REQUEST: "invalid",
    status.HTTP_401_UNAUTHORIZED: "not_authenticated",
    status.HTTP_403_FORBIDDEN: "permission_denied",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_406_NOT_ACCEPTABLE: "not_acceptable",
    status.HTTP_409_CONFLICT: "conflict",
    status.HTTP_413_REQUEST_ENTITY_TOO_LARGE: "too_large",
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
    status.HTTP_429_TOO_MANY_REQUESTS: "throttled",
}


class StateConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def _flatten(detail) -> list[str]:
    if isinstance(detail, dict):
        return [f"{key}: {message}" for key, value in detail.items() for message in _flatten(value)]
    if isinstance(detail, list):
        return [message for item in detail for message in _flatten(item)]
    return [str(detail)]


def _fields(detail: dict) -> dict[str, list[str]]:
    return {("non_field_errors" if key == "__all__" else key): _flatten(value) for key, value in detail.items()}


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def exception_handler(exc, context):
    """DRF's handler, plus the services' Django ValidationError, all in one shape."""
    # Imported here: rest_framework.views reads the authentication setting, which names this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, Conflict):
        exc = StateConflict(" ".join(exc.messages))
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages})
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or "You may not do this.")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # an unexpected error: Django's 500 handling and logging take over
    # The portal's own exceptions name their code (locked, too_large, cluster_unavailable); DRF's go by status.
    own = isinstance(exc, exceptions.APIException) and not type(exc).__module__.startswith("rest_framework")
    code = exc.default_code if own else STATUS_CODES.get(response.status_code) or getattr(exc, "default_code", "error")
    detail = exc.detail if isinstance(exc, exceptions.APIException) else response.data
    if isinstance(exc, exceptions.ValidationError):
        fields = _fields(detail) if isinstance(detail, dict) else {"non_field_errors": _flatten(detail)}
        general = fields.get("non_field_errors")
        message = " ".join(general) if general else "Some fields are not valid."
        response.data = error_body(code, message, fields)
    else:
        response.data = error_body(code, " ".join(_flatten(detail)))
    return response


def valid_input(serializer_class, request) -> dict:
    """The request body parsed by an input serializer; a 400 in the one error shape when it does not parse."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


# The one error shape, documented on every operation so clients (and the schema checks) can rely on it.
ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["code", "message", "fields"],
        "properties": {
            "code": {"type": "string", "description": "Stable, machine-readable: invalid, not_found, throttled…"},
            "message": {"type": "string", "description": "For people."},
            "fields": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                       "description": "Per input field, what is wrong with it (400 only)."},
        },
    }},
}
ERROR_RESPONSES = {
    "400": "The input is not valid: `fields` names each field and what is wrong. Beyond the rules this schema "
           "states, some depend on stored data (a flavor or tier that must exist, a quota the job must fit, "
           "a range between two parameters); they are named in the operation's description.",
    "401": "No valid credentials: send `Authorization: Bearer gpp_…` (a personal access token).",
    "403": "Your role in the team does not allow this.",
    "404": "No such object among those you can see (another team's objects are not found), or a `cursor` this "
           "list did not hand out.",
    "429": "Too many requests for this token (retry after the Retry-After header's seconds), or too many bad tokens "
           "from your address (`locked`: it is locked for LOGIN_LOCKOUT_MINUTES after the last one).",
}


WRITE_RESPONSES = {
    "409": "The object's current state does not allow this: cancelling a job that has ended, resubmitting one that "
           "has not, deciding or withdrawing a request that is no longer pending, approving past the flavor's "
           "capacity, acting for an archived team, removing a team's last admin.",
    "413": "The request body is larger than the portal accepts (DATA_UPLOAD_MAX_MEMORY_SIZE).",
}


def error_responses_hook(result, generator, request, public):
    """drf-spectacular postprocessing: the Error component and the error responses of every operation (409 and
    413 on writes), and the rule that no query parameter may hold a NUL character."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            extra = WRITE_RESPONSES if method in ("post", "put", "patch", "delete") else {}
            for code, description in {**ERROR_RESPONSES, **extra}.items():
                responses.setdefault(code, {"description": description})
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if schema.get("type") == "string" and not {"pattern", "enum", "format"} & set(schema):
                    schema["pattern"] = NO_NUL
            for code, response in responses.items():
                if int(code) >= 400:
                    response.setdefault("content", content)
    return result


@csrf_exempt  # it changes nothing, and an unknown path must not turn into an HTML CSRF page
def api_not_found(request, *args, **kwargs):
    """Every path under /api/ that names no endpoint (or a malformed id) gets the JSON 404, not an HTML page."""
    return JsonResponse(error_body("not_found", f"No such endpoint: {request.path}. The API is described at "
                                                "/api/docs/."), status=404)


def server_error(request):
    """handler500: under /api/ the one error shape (a database that is away is a 503 to retry, anything else a
    500), so a client parses every answer the same way; elsewhere Django's own page. Django calls it while the
    exception is being handled, so sys.exc_info() names it."""
    if not request.path.startswith("/api/"):
        return defaults.server_error(request)
    exc = sys.exc_info()[1]
    if isinstance(exc, DatabaseError):
        return JsonResponse(error_body("unavailable", "The portal's database is not answering; try again shortly."),
                            status=503, headers={"Retry-After": "5"})
    return JsonResponse(error_body("server_error", "Something went wrong on the portal's side; it has been logged."),
                        status=500)


# --- pagination ----------------------------------------------------------------------------------------------


class Pagination(CursorPagination):
    """Cursor pages over a stable order (each view names it, ending in a unique field): no COUNT(*) and no
    duplicates or gaps when rows arrive between two pages."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    ordering = "-id"
    position_field = None  # the model field the cursor's position is a value of (set per request)

    def get_ordering(self, request, queryset, view):
        ordering = getattr(view, "ordering", None) or self.ordering
        return (ordering,) if isinstance(ordering, str) else tuple(ordering)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update({"minimum": 1, "maximum": self.max_page_size, "default": self.page_size})
            if parameter["name"] == self.cursor_query_param:
                parameter["description"] = "A `next` or `previous` link's cursor; any other is a 404."
        return parameters

    def get_page_size(self, request):
        """The page_size asked for: a whole number from 1 to max_page_size, or the default when absent. DRF would
        silently fall back to the default for anything else (page_size=null), hiding the client's mistake."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= self.max_page_size:
            raise exceptions.ValidationError({self.page_size_query_param: [
                f"A whole number from 1 to {self.max_page_size}."]})
        return int(raw)

    def paginate_queryset(self, queryset, request, view=None):
        name = self.get_ordering(request, queryset, view)[0].lstrip("-")
        self.position_field = queryset.model._meta.get_field(name)
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        """A cursor's position must be a value its ordering field can hold: a forged one (text where the field is
        a number, a number past the column's range, a NUL) is an invalid cursor, not a database error."""
        cursor = super().decode_cursor(request)
        field = self.position_field
        if cursor is None or cursor.position is None or field is None:
            return cursor
        try:
            if "\x00" in cursor.position:
                raise DjangoValidationError("NUL")
            field.run_validators(field.to_python(cursor.position))
        except (DjangoValidationError, ValueError, TypeError, OverflowError):
            raise exceptions.NotFound(self.invalid_cursor_message) from None
        return cursor


class KeysetPagination(Pagination):
    """Pagination's pages, links and cursor parameter for a list that a selector reads itself by keyset: the rows
    after a position (time, id) in the list's order, or before it going back. The view hands paginate_rows a
    fetch(position=, reverse=, limit=) and the row's position; the cursor names the position, so a page costs
    the same however deep it is."""

    def paginate_rows(self, request, fetch, position_of) -> list:
        self.request = request
        self.base_url = request.build_absolute_uri()
        self.page_size = self.get_page_size(request)
        cursor = self.decode_cursor(request)
        position = self._decode_position(cursor.position) if cursor else None
        reverse = bool(cursor and cursor.reverse)
        rows = fetch(position=position, reverse=reverse, limit=self.page_size + 1)
        more = len(rows) > self.page_size
        rows = rows[:self.page_size]
        if reverse:
            rows.reverse()
        # Going back, the page we came from is after this one; going forward, the one we came from is before it.
        self.has_next, self.has_previous = (True, more) if reverse else (more, position is not None)
        self.first, self.last = (position_of(rows[0]), position_of(rows[-1])) if rows else (None, None)
        return rows

    def get_next_link(self):
        if not self.has_next:
            return None
        if self.last is None:  # went back past the newest row: start again from the top
            return remove_query_param(self.base_url, self.cursor_query_param)
        return self.encode_cursor(Cursor(offset=0, reverse=False, position=self._encode_position(self.last)))

    def get_previous_link(self):
        if not self.has_previous or self.first is None:
            return None
        return self.encode_cursor(Cursor(offset=0, reverse=True, position=self._encode_position(self.first)))

    @staticmethod
    def _encode_position(position: tuple) -> str:
        moment, pk = position
        return f"{moment.isoformat()}|{pk}"

    def _decode_position(self, text: str | None) -> tuple:
        try:
            moment, pk = (text or "").split("|")
            moment = datetime.fromisoformat(moment)
            if moment.tzinfo is None:
                raise ValueError("naive")
            pk = int(pk)
            if not 0 < pk < 2 ** 63:  # a row id (a 64-bit integer) or nothing
                raise ValueError("id")
            # In UTC: PostgreSQL refuses offsets beyond ±15:59 that Python parses.
            return moment.astimezone(UTC), pk
        except (ValueError, OverflowError):
            raise exceptions.NotFound(self.invalid_cursor_message) from None


# --- throttling ----------------------------------------------------------------------------------------------


class TokenRateThrottle(SimpleRateThrottle):
    """Requests per token (a token is the unit a script runs as); browser sessions count per user, anonymous
    callers per address. The rate is the API_THROTTLE_RATE setting.

    A fixed window counted with one cache increment, rather than DRF's list of every request time in the window:
    the cost per request stays constant whatever the rate, and the count is atomic in a shared cache."""

    scope = "api"

    def get_rate(self):
        return settings.API_THROTTLE_RATE

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        now = self.timer()
        window = int(now // self.duration)
        key = f"{self.get_cache_key(request, view)}:{window}"
        incr_window = getattr(self.cache, "incr_window", None)  # portal.cache.RedisCache: one round trip
        try:
            count = incr_window(key, self.duration + 1) if incr_window else self._incr_window(key, self.duration + 1)
        except Exception as exc:  # noqa: BLE001 - whatever the cache client raises (redis.ConnectionError, ...)
            # Fail open: the budget protects the portal from a runaway script, and refusing every request while the
            # shared counter is away would do that script's damage to everyone. Warned once a minute per process.
            _warn_unthrottled(exc)
            return True
        self.retry_after = (window + 1) * self.duration - now
        return count <= self.num_requests

    def _incr_window(self, key: str, timeout: int) -> int:
        self.cache.add(key, 0, timeout)
        try:
            return self.cache.incr(key)
        except ValueError:  # the window's key expired between add and incr
            self.cache.set(key, 1, timeout)
            return 1

    def wait(self):
        return self.retry_after

    def get_cache_key(self, request, view):
        if request.auth is not None:  # a personal access token (the only authentication that sets one)
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = f"ip-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


_last_warned = [0.0]


def _warn_unthrottled(exc: Exception) -> None:
    now = time.monotonic()
    if now - _last_warned[0] >= 60:
        _last_warned[0] = now
        log.warning("API throttle cache unavailable (%s): requests are not throttled until it answers", exc)
