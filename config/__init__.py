"""The project's wiring: settings, URL conf, the Celery app and the WSGI entry point. It sits on top of every app."""

from .celery import app as celery_app

__all__ = ("celery_app",)
