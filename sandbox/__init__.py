"""A Kubernetes API emulator: a real HTTP server on localhost with Kubernetes semantics, for tests and demos."""

from .cluster import Sandbox

__all__ = ["Sandbox"]
