"""The portal and the sandbox it is tested against name the same upstream releases, each in its one table."""

from pathlib import Path

from portal import upstream as portal_upstream
from sandbox import upstream as sandbox_upstream
from sandbox.server import VERSION_INFO

ROOT = Path(__file__).resolve().parents[2]


def test_the_sandbox_emulates_the_releases_the_portal_is_written_against():
    assert sandbox_upstream.KUBERNETES.startswith(f"{portal_upstream.KUBERNETES}.")
    assert (sandbox_upstream.KUEUE, sandbox_upstream.VOLCANO, sandbox_upstream.KUBERAY) == (
        portal_upstream.KUEUE, portal_upstream.VOLCANO, portal_upstream.KUBERAY)
    assert VERSION_INFO["gitVersion"] == sandbox_upstream.KUBERNETES  # what /version reports
    assert f"{VERSION_INFO['major']}.{VERSION_INFO['minor']}" == portal_upstream.KUBERNETES.removeprefix("v")


def test_releases_are_spelled_only_in_the_tables():
    releases = {sandbox_upstream.KUBERNETES, portal_upstream.KUEUE, portal_upstream.VOLCANO}
    found = [f"{path.relative_to(ROOT)}: {release}" for path in sorted((ROOT / "sandbox").rglob("*.py"))
             if path.name != "upstream.py" for release in releases if release in path.read_text()]
    assert found == []
