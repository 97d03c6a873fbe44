"""What one request may carry: a body no larger than DATA_UPLOAD_MAX_MEMORY_SIZE and no deeper than MAX_JSON_DEPTH,
and no NUL character in its query string (PostgreSQL cannot store or compare one: it would be a 500). Under /api/
the refusal is in the API's one error shape; on pages it is a plain 400."""

import json

from django.conf import settings
from django.http import HttpResponseBadRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser

# Deeper than any body the API accepts (its deepest is a list of strings inside an object), far below the
# interpreter's recursion limit, so parsing and validating a body never recurses dangerously.
MAX_JSON_DEPTH = 32

# The text rules of every string input, as schema patterns: no NUL character anywhere (PostgreSQL cannot store one),
# and, where the API trims whitespace and refuses a blank, at least one character that is not whitespace.
NO_NUL = "^[^\\u0000]*$"
NOT_BLANK = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"

# Months, days and end dates the portal accepts: billing starts in 2000, and a bound far below year 9999 keeps
# every month's and day's arithmetic (next month, +366 days, an hour past midnight) inside what dates can hold.
EARLIEST_YEAR, LATEST_YEAR = 2000, 2999


def year_in_range(year: int) -> bool:
    return EARLIEST_YEAR <= year <= LATEST_YEAR


# The same ranges as schema patterns (years 2000-2999).
MONTH_PATTERN = "^2[0-9]{3}-(0[1-9]|1[0-2])$"
DAY_PATTERN = "^2[0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def too_large_message() -> str:
    return f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."


def _depth(value) -> int:
    """How deeply lists and objects nest in a parsed JSON value (a scalar is 0), without recursing."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


class LimitedJSONParser(JSONParser):
    """DRF's JSON parser reads the raw stream, past Django's DATA_UPLOAD_MAX_MEMORY_SIZE check; this one reads at
    most that much, and refuses nesting that would exhaust the interpreter's stack (json raises RecursionError)."""

    def parse(self, stream, media_type=None, parser_context=None):
        if stream is None:
            return None
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise RequestTooLarge(too_large_message())
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json.loads(raw.decode(encoding), parse_constant=self._refuse_constant)
        except RecursionError:
            raise exceptions.ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.") from None
        except ValueError as exc:  # includes UnicodeDecodeError and json.JSONDecodeError
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        if _depth(data) > MAX_JSON_DEPTH:
            raise exceptions.ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.")
        return data

    @staticmethod
    def _refuse_constant(name):
        raise ValueError(f"{name} is not JSON")


def _api(request) -> bool:
    return request.path.startswith("/api/")


def _error(request, status_code: int, code: str, message: str, fields: dict | None = None):
    if _api(request):
        return JsonResponse({"error": {"code": code, "message": message, "fields": fields or {}}}, status=status_code)
    return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


class RequestLimitsMiddleware:
    """Refuses, before any view runs, a declared body over the upload limit on API paths (a 413 in the error shape,
    where Django would raise RequestDataTooBig only if something reads request.body) and a NUL in any query
    parameter."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if _api(request) and limit is not None:
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > limit:
                return _error(request, 413, "too_large", too_large_message())
        if "\x00" in request.path:
            return _error(request, 400, "invalid", "The path may not contain NUL characters.")
        bad = sorted({name for name, values in request.GET.lists() for value in [name, *values] if "\x00" in value})
        if bad:
            return _error(request, 400, "invalid", "Query parameters may not contain NUL characters.",
                          {name or "query": ["NUL characters are not allowed."] for name in bad})
        return self.get_response(request)
