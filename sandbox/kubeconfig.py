"""Kubeconfig documents pointing at a sandbox (plain HTTP, a static token the sandbox ignores)."""

from __future__ import annotations

import os

import yaml


def kubeconfig(url: str, context: str = "sandbox") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": url}}],
        "users": [{"name": context, "user": {"token": "sandbox"}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike, url: str, context: str = "sandbox") -> None:
    with open(path, "w") as f:
        yaml.safe_dump(kubeconfig(url, context), f, sort_keys=False)
