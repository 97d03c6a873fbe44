"""The lock files pin every package with hashes and agree with pyproject.toml (and the dev lock with
sandbox/pyproject.toml too: the sandbox distribution's dependencies are installed for the demo and the tests only).

`make lock-check` (in CI) proves it fully by resolving again; these checks need no network, so a dependency
added, changed or removed in pyproject.toml without `make lock` fails in the ordinary suite too.
"""

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# How the lock names a pyproject.toml as the reason for a direct dependency (`pyproject.toml:build` for a group).
PYPROJECT = re.compile(r"^(gpu-portal \(pyproject\.toml|gpu-portal-sandbox \(sandbox/pyproject\.toml)(:[a-z-]+)?\)$")
OURS = ("gpu-portal ", "gpu-portal-sandbox ")


def parse_lock(text: str) -> dict[str, dict]:
    """Name → {version, hashes, via} for each entry of a `uv pip compile --generate-hashes` file."""
    entries: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if pin := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)", line):
            current = {"version": pin[2], "hashes": [], "via": []}
            entries[canonicalize_name(pin[1])] = current
        elif current is not None and (digest := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            current["hashes"].append(digest[1])
        elif current is not None and (via := re.match(r"^\s+#\s+(?:via\s+)?(\S.*)$", line)):
            if via[1] != "via":
                current["via"].append(via[1])
        elif line and not line.startswith((" ", "#")):
            raise AssertionError(f"unexpected line in a lock file: {line!r}")
    return entries


def is_direct(entry: dict) -> bool:
    return any(PYPROJECT.match(via) for via in entry["via"])


def direct_requirements(*, dev: bool) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = list(project["project"]["dependencies"]) + list(project["dependency-groups"]["build"])
    if dev:
        names += project["project"]["optional-dependencies"]["dev"] + sandbox_requirements()
    return [Requirement(name) for name in names]


def sandbox_requirements() -> list[str]:
    return list(tomllib.loads((ROOT / "sandbox" / "pyproject.toml").read_text())["project"]["dependencies"])


@pytest.fixture(scope="module")
def locks():
    return {
        "app": parse_lock((ROOT / "requirements.lock").read_text()),
        "dev": parse_lock((ROOT / "requirements-dev.lock").read_text()),
    }


@pytest.mark.parametrize("which", ["app", "dev"])
def test_every_package_is_pinned_with_hashes(locks, which):
    lock = locks[which]
    assert len(lock) > len(direct_requirements(dev=which == "dev"))  # the transitive ones are there too
    assert [name for name, entry in lock.items() if not entry["hashes"]] == []


@pytest.mark.parametrize("which", ["app", "dev"])
def test_direct_dependencies_match_pyproject(locks, which):
    lock = locks[which]
    wanted = {canonicalize_name(req.name): req for req in direct_requirements(dev=which == "dev")}
    missing = sorted(set(wanted) - set(lock))
    assert missing == [], f"in pyproject.toml but not in the lock: {missing} (run `make lock`)"
    stale = {
        name: lock[name]["version"] for name, req in wanted.items() if not req.specifier.contains(lock[name]["version"])
    }
    assert stale == {}, f"the lock pins other versions than pyproject.toml: {stale} (run `make lock`)"
    claimed = {name for name, entry in lock.items() if is_direct(entry)}
    assert sorted(claimed - set(wanted)) == [], "the lock holds direct dependencies pyproject.toml no longer names"
    assert sorted(set(wanted) - claimed) == [], "pyproject.toml names dependencies the lock was not resolved for"


@pytest.mark.parametrize("which", ["app", "dev"])
def test_every_transitive_package_is_needed_by_another_locked_one(locks, which):
    lock = locks[which]
    orphans = []
    for name, entry in lock.items():
        parents = {canonicalize_name(via) for via in entry["via"] if not via.startswith(("-c ", *OURS))}
        if not is_direct(entry) and not parents & set(lock):
            orphans.append(name)
    assert orphans == []


def test_the_app_lock_is_the_dev_lock_without_the_dev_extras(locks):
    app, dev = locks["app"], locks["dev"]
    assert sorted(set(app) - set(dev)) == []
    assert {name: (entry["version"], entry["hashes"]) for name, entry in app.items()} == {
        name: (dev[name]["version"], dev[name]["hashes"]) for name in app
    }
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dev_extras = {canonicalize_name(Requirement(name).name)
                  for name in project["project"]["optional-dependencies"]["dev"]}
    assert sorted(dev_extras & set(app)) == []


def test_the_app_lock_holds_what_only_the_sandbox_needs_only_where_the_app_needs_it_too(locks):
    # e.g. kubernetes-validate is the sandbox's alone; jsonschema stays because drf-spectacular needs it.
    app = locks["app"]
    app_direct = {canonicalize_name(req.name) for req in direct_requirements(dev=False)}
    sandbox_only = {canonicalize_name(Requirement(name).name) for name in sandbox_requirements()} - app_direct
    assert sandbox_only, "the sandbox needs packages the app does not"
    leaked = {name: app[name]["via"] for name in sandbox_only & set(app)
              if not {canonicalize_name(via) for via in app[name]["via"]} & set(app)}
    assert leaked == {}
    assert "kubernetes-validate" not in app


def test_parse_lock_reads_versions_hashes_and_parents():
    text = (
        "# header\n"
        "amqp==5.4.2 \\\n"
        f"    --hash=sha256:{'a' * 64} \\\n"
        f"    --hash=sha256:{'b' * 64}\n"
        "    # via kombu\n"
        "async-timeout==5.0.1 ; python_full_version < '3.11.3' \\\n"
        f"    --hash=sha256:{'c' * 64}\n"
        "    # via\n"
        "    #   -c requirements-dev.lock\n"
        "    #   redis\n"
    )
    assert parse_lock(text) == {
        "amqp": {"version": "5.4.2", "hashes": ["a" * 64, "b" * 64], "via": ["kombu"]},
        "async-timeout": {"version": "5.0.1", "hashes": ["c" * 64], "via": ["-c requirements-dev.lock", "redis"]},
    }
