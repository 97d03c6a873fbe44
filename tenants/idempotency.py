"""`Idempotency-Key` on the API's create endpoints: a retried create answers what the first one did.

The key is taken in the same transaction as the create, so the object and the stored answer commit together or
not at all: a request that failed (4xx or 5xx) stores nothing and may be sent again with the same key. Two
requests with one key at once are serialised by the key's unique row: the second waits for the first to commit,
then replays its answer. Answers are kept IDEMPOTENCY_KEY_HOURS; after that a key is new again.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from functools import wraps

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions
from rest_framework.response import Response

from .records import IdempotencyKey

HEADER = "Idempotency-Key"
KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")  # printable ASCII without spaces, as the IETF draft's examples

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    HEADER, str, OpenApiParameter.HEADER, required=False, pattern=KEY_RE.pattern,
    description=("Any unique string (a UUID): a retry with the same key and body answers what the first request did "
                 "(header `Idempotent-Replayed: true`) instead of creating a second object. Kept for "
                 "IDEMPOTENCY_KEY_HOURS; the same key with another body is a 422."))


class KeyReused(exceptions.APIException):
    status_code = 422
    default_code = "idempotency_key_reused"
    default_detail = (f"This {HEADER} was first sent with another request; use a new key for a new request.")


def _fingerprint(request) -> str:
    body = request.body if request.body is not None else b""
    return hashlib.sha256(request.method.encode() + b" " + request.path.encode() + b"\n" + body).hexdigest()


def idempotent(view_method):
    """Decorates an APIView's `post`: with the header, the answer is stored with the write and replayed."""

    @wraps(view_method)
    def wrapped(view, request, *args, **kwargs):
        key = request.headers.get(HEADER)
        if key is None:
            return view_method(view, request, *args, **kwargs)
        if not KEY_RE.match(key):
            raise exceptions.ValidationError({HEADER: ["1 to 255 printable ASCII characters, no spaces."]})
        fingerprint = _fingerprint(request._request)
        fresh_after = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)
        with transaction.atomic():
            IdempotencyKey.objects.filter(user=request.user, key=key, created_at__lt=fresh_after).delete()
            try:
                with transaction.atomic():
                    # Claims the key: a concurrent request with it waits here until this transaction ends.
                    claim = IdempotencyKey.objects.create(user=request.user, key=key, fingerprint=fingerprint,
                                                          status=0, body={})
            except IntegrityError:
                stored = IdempotencyKey.objects.get(user=request.user, key=key)
                if stored.fingerprint != fingerprint:
                    raise KeyReused() from None
                return Response(stored.body, status=stored.status, headers={"Idempotent-Replayed": "true"})
            response = view_method(view, request, *args, **kwargs)
            if response.status_code >= 300:
                transaction.set_rollback(True)  # only a success is kept; a failure may be retried as it was
                return response
            claim.status = response.status_code
            claim.body = _plain(response.data)
            claim.save(update_fields=["status", "body"])
            return response

    return wrapped


def idempotency_keys_prune() -> int:
    """Forget answers older than IDEMPOTENCY_KEY_HOURS (beat, hourly)."""
    before = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)
    return IdempotencyKey.objects.filter(created_at__lt=before).delete()[0]


def _plain(data):
    """The response's data as JSON values (what a replay renders the same way)."""
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))
