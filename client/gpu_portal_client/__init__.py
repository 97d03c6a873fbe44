"""Python client for the GPU Portal API."""

from .client import Job, Portal, Workspace
from .errors import (
    AuthenticationError,
    JobFailed,
    NotFound,
    PermissionDenied,
    PortalError,
    RateLimited,
    ServerError,
    ValidationError,
)

__all__ = ["AuthenticationError", "Job", "JobFailed", "NotFound", "PermissionDenied", "Portal", "PortalError",
           "RateLimited", "ServerError", "ValidationError", "Workspace"]
