"""Patch formats: JSON merge and JSON patch (strategic merge is `sandbox.strategic`, server-side apply's field
bookkeeping `sandbox.fieldpath`)."""

from __future__ import annotations

import copy

Path = tuple[str, ...]


class PatchError(ValueError):
    """A patch that cannot be applied (bad document or a failing JSON-patch `test`)."""


def merge_patch(target, patch):
    """RFC 7386: maps merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc, parts: list[str]):
    node = doc
    for part in parts[:-1]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise PatchError(f"doc is missing path: /{'/'.join(parts)}") from None
    return node


def _get(doc, parts):
    if not parts:
        return doc
    node = _container(doc, parts)
    try:
        return node[int(parts[-1])] if isinstance(node, list) else node[parts[-1]]
    except (KeyError, IndexError, ValueError, TypeError):
        raise PatchError(f"doc is missing path: /{'/'.join(parts)}") from None


def _remove(doc, parts):
    node = _container(doc, parts)
    _get(doc, parts)
    if isinstance(node, list):
        return node.pop(int(parts[-1]))
    return node.pop(parts[-1])


def _add(doc, parts, value):
    if not parts:
        return value
    node = _container(doc, parts)
    key = parts[-1]
    if isinstance(node, list):
        index = len(node) if key == "-" else int(key)
        if not 0 <= index <= len(node):
            raise PatchError(f"index out of range: {key}")
        node.insert(index, value)
    elif isinstance(node, dict):
        node[key] = value
    else:
        raise PatchError(f"doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(doc, operations):
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}")
        parts = _pointer(op["path"])
        kind = op["op"]
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _get(doc, parts)
            if parts:
                _remove(doc, parts)
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise PatchError(f"testing value /{'/'.join(parts)} failed")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc
