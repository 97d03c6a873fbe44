"""YAML for people to read and to apply: every object written out in full, never as &id001 anchors and *id001
aliases (PyYAML's default when one dict or list is shared, e.g. the same tolerations on every pod template)."""

from __future__ import annotations

from collections.abc import Iterable

import yaml


class PlainDumper(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:
        return True


def dump(document, **options) -> str:
    return yaml.dump(document, Dumper=PlainDumper, sort_keys=False, allow_unicode=True, **options)


def dump_all(documents: Iterable, **options) -> str:
    return yaml.dump_all(documents, Dumper=PlainDumper, sort_keys=False, allow_unicode=True, **options)
