"""Helpers for tests that drive a sandbox through the official `kubernetes` client."""

from __future__ import annotations

import os
import tempfile


def _url(sb) -> str:
    return sb if isinstance(sb, str) else sb.url


def api_client(sb, retries: int | bool = 0):
    """An ApiClient for a `Sandbox` (or a sandbox URL). `retries=0`: a fault surfaces at once instead of being
    retried by urllib3 (whose default retries hide one-shot faults and delays)."""
    from kubernetes import client

    configuration = client.Configuration(host=_url(sb))
    configuration.api_key = {"authorization": "Bearer sandbox"}
    configuration.retries = retries
    return client.ApiClient(configuration)


def dynamic_client(sb, retries: int | bool = 0):
    """A DynamicClient whose discovery cache is private: the default cache file is keyed by URL, and ports get
    reused by later sandboxes serving other kinds."""
    from kubernetes.dynamic import DynamicClient

    fd, cache_file = tempfile.mkstemp(prefix="sandbox-discovery-", suffix=".json")
    os.close(fd)
    os.unlink(cache_file)
    return DynamicClient(api_client(sb, retries), cache_file=cache_file)
