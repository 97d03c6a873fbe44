"""Deterministic Kubernetes names and the labels every portal-owned object carries."""

import hashlib
import re

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-portal"
TEAM_LABEL = "gpu-portal.io/team"
SCOPE_LABEL = "gpu-portal.io/scope"
CLUSTER_SCOPE = "cluster"

_INVALID = re.compile(r"[^a-z0-9-]+")
# Both rules as the API server checks them (apimachinery pkg/util/validation/validation.go): at most 63
# characters; a DNS-1035 label (Service names, KubeRay's objects) must also start with a letter.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns1035_label(value: str) -> bool:
    return len(value) <= 63 and _DNS1035_LABEL.fullmatch(value) is not None


def dns_name(*parts: str, limit: int = 63) -> str:
    """Join parts into a DNS-1123 label; when too long, truncate and add a short hash so names stay unique."""
    name = _INVALID.sub("-", "-".join(p for p in parts if p).lower()).strip("-")
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def dns1035_name(*parts: str, limit: int = 63, lead: str = "x") -> str:
    """As `dns_name`, and starting with a letter: `lead` goes in front of a name that would start with a digit."""
    name = dns_name(*parts, limit=limit)
    if name[:1].isalpha():
        return name
    return dns_name(lead, *parts, limit=limit)


def team_labels(team_slug: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, TEAM_LABEL: team_slug}


def cluster_labels() -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, SCOPE_LABEL: CLUSTER_SCOPE}


def team_selector(team_slug: str) -> str:
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{TEAM_LABEL}={team_slug}"


def cluster_scope_selector() -> str:
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{SCOPE_LABEL}={CLUSTER_SCOPE}"


def managed_selector() -> str:
    return f"{MANAGED_BY_LABEL}={MANAGED_BY}"
