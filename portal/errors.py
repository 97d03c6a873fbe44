"""The one domain error that is not about the input: the request is well formed, but the object's current state
does not allow it (cancelling a job that has ended, deciding a request that is no longer pending, approving past
capacity). A ValidationError, so forms show it as before; the API answers it 409 Conflict."""

from django.core.exceptions import ValidationError


class Conflict(ValidationError):
    pass
