"""Patch formats (JSON merge, JSON patch; strategic merge is `sandbox.strategic`) and the field bookkeeping of
server-side apply.

Server-side apply here treats maps granularly and lists atomically (a list is one field, owned as a whole),
which is what a real server does for lists without merge keys; lists with merge keys (containers, ports...)
are owned per item by a real server.
"""

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


# Server-side apply ---------------------------------------------------------------------------------------------

_SERVER_METADATA = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName"}


def leaf_paths(value, prefix: Path = ()) -> set[Path]:
    if isinstance(value, dict) and value:
        paths: set[Path] = set()
        for key, child in value.items():
            paths |= leaf_paths(child, (*prefix, key))
        return paths
    return {prefix} if prefix else set()


def applied_fields(applied: dict, status_only: bool) -> set[Path]:
    """The fields an apply configuration sets (identity and server-set metadata excluded)."""
    paths: set[Path] = set()
    for key, value in applied.items():
        if key in ("apiVersion", "kind") or (key == "status") != status_only:
            continue
        if key == "metadata":
            meta = {k: v for k, v in (value or {}).items() if k not in _SERVER_METADATA}
            if meta:
                paths |= leaf_paths(meta, ("metadata",))
        else:
            paths |= leaf_paths(value, (key,))
    return paths


_MISSING = object()


def get_path(obj, path: Path):
    node = obj
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def deep_merge(live, applied):
    """Apply configuration over the live object: maps merge, lists and scalars replace."""
    if not isinstance(applied, dict) or not isinstance(live, dict):
        return copy.deepcopy(applied)
    result = dict(live)
    for key, value in applied.items():
        result[key] = deep_merge(live.get(key), value)
    return result


def remove_path(obj: dict, path: Path) -> None:
    """Remove a field and any map that this removal left empty."""
    chain = [obj]
    for part in path[:-1]:
        node = chain[-1].get(part)
        if not isinstance(node, dict):
            return
        chain.append(node)
    chain[-1].pop(path[-1], None)
    for depth in range(len(chain) - 1, 0, -1):
        if chain[depth]:
            break
        chain[depth - 1].pop(path[depth - 1], None)


def fields_v1(paths: set[Path]) -> dict:
    tree: dict = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return tree


def paths_from_fields_v1(tree: dict, prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, child in tree.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        paths |= paths_from_fields_v1(child, path) if child else {path}
    return paths
