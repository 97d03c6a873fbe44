"""Label and field selectors with kube-apiserver's grammar."""

from __future__ import annotations

import re
from collections.abc import Callable

from . import field_labels
from .errors import bad_request

Matcher = Callable[[dict], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=<>,()]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([^\s!=<>,()]+)\s*(==|=|!=)\s*([^\s,()]*)\s*$")


def _split_requirements(text: str) -> list[str]:
    """Split on commas that are not inside an `in (...)` value list."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _label_requirement(text: str) -> Matcher:
    m = _EQ_RE.match(text)
    if m:
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    m = _SET_RE.match(text)
    if m:
        negated, key, op, values = m.groups()
        if op:
            if negated:
                raise bad_request(f"unable to parse requirement: {text!r}")
            options = {v.strip() for v in values.split(",") if v.strip()}
            if op == "in":
                return lambda labels: labels.get(key) in options
            return lambda labels: labels.get(key) not in options
        if negated:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: found '{text.strip()}', expected: identifier")


def label_selector(text: str | None) -> Matcher | None:
    """A matcher over an object's metadata.labels, or None for "everything"."""
    if not text or not text.strip():
        return None
    requirements = [_label_requirement(part) for part in _split_requirements(text)]

    def match(obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return match


def _field_value(obj: dict, path: str) -> str:
    value = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def matches_label_selector(selector: dict, labels: dict) -> bool:
    """A metav1.LabelSelector object (matchLabels, matchExpressions) against labels, as LabelSelectorAsSelector
    reads it (k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go): every pair and every expression must hold; {}
    selects everything."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, values = expression.get("key"), expression.get("values") or []
        held = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}.get(expression.get("operator"), False)
        if not held:
            return False
    return True


def field_selector(text: str | None, rt=None, version: str | None = None) -> Matcher | None:
    """A matcher for fieldSelector (=, ==, !=) over a dotted field path, e.g. metadata.name or status.phase. With
    the kind (`rt`), only the fields it exports may be named, as the API server has it (`field_labels`)."""
    if not text or not text.strip():
        return None
    requirements = []
    for part in text.split(","):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        requirements.append(m.groups())
    if rt is not None:
        field_labels.check(rt, [label for label, _, _ in requirements], version)
        requirements = [(field_labels.path(rt, label), op, value) for label, op, value in requirements]

    def match(obj: dict) -> bool:
        for path, op, value in requirements:
            equal = _field_value(obj, path) == value
            if equal == (op == "!="):
                return False
        return True

    return match


def combine(*matchers: Matcher | None) -> Matcher | None:
    active = [m for m in matchers if m is not None]
    if not active:
        return None
    if len(active) == 1:
        return active[0]
    return lambda obj: all(m(obj) for m in active)
