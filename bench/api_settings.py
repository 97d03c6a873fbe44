"""Bench-only settings: the portal's, with the bench URL conf (which adds the floor view)."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.api_urls"
