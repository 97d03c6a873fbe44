"""Shown YAML spells every object out: a shared dict or list never becomes an &id001 anchor and *id001 alias."""

import yaml

from portal import yamltext


def test_shared_objects_are_written_in_full_and_read_back_equal():
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    documents = [{"kind": "Job", "spec": {"a": {"tolerations": tolerations}, "b": {"tolerations": tolerations}}},
                 {"kind": "Service", "spec": {"tolerations": tolerations}}]
    assert "&id" in yaml.safe_dump_all(documents)  # PyYAML's default, which the pages must not show
    text = yamltext.dump_all(documents)
    assert "&id" not in text and "*id" not in text
    assert text.index("kind: Job") < text.index("spec:")  # keys keep their order
    assert list(yaml.safe_load_all(text)) == documents
    assert "&" not in yamltext.dump({"x": tolerations, "y": tolerations})
