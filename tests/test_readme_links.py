"""The README is the front door: every relative link in it (to docs/ pages, images, other files) must lead somewhere.

The pages under docs/ are checked by `make docs` (MkDocs in strict mode); this covers the README, which the site
does not build.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# [text](target) and ![alt](target), with an optional "title"; reference-style definitions `[name]: target`.
INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)


def relative_links(markdown: str) -> list[str]:
    # Code spans and fenced blocks may hold brackets that are not links.
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = INLINE.findall(text) + REFERENCE.findall(text)
    return [t for t in targets if not re.match(r"^([a-z][a-z0-9+.-]*:|#)", t, re.I)]


def broken_links(markdown: str, base: Path) -> list[str]:
    return [t for t in relative_links(markdown) if not (base / t.split("#", 1)[0]).exists()]


def test_every_relative_link_in_the_readme_leads_to_a_file():
    readme = (ROOT / "README.md").read_text()
    assert relative_links(readme), "the README links into docs/"
    assert broken_links(readme, ROOT) == []


def test_the_check_finds_a_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n")
    text = (
        "See [the docs](docs/index.md#home), [a guide](docs/guide.md) and ![a shot](docs/images/a.png).\n"
        "[ops]: docs/operations.md\n"
        "Not links: [the site](https://example.com), [top](#top), `[x](docs/in-code.md)`.\n"
    )
    assert relative_links(text) == ["docs/index.md#home", "docs/guide.md", "docs/images/a.png", "docs/operations.md"]
    assert broken_links(text, tmp_path) == ["docs/guide.md", "docs/images/a.png", "docs/operations.md"]


def test_make_screenshots_writes_every_image_the_docs_show():
    # `make screenshots` refreshes docs/images/; an image it does not write would go stale, one it writes unused.
    from tools.screenshots import DOCS, WIDTHS

    written = {f"{name}-{width}.png" for name in DOCS.values() for width in WIDTHS.values()}
    committed = {path.name for path in (ROOT / "docs" / "images").iterdir()}
    shown = set()
    for page in (ROOT / "docs").glob("*.md"):
        shown |= {Path(t).name for t in relative_links(page.read_text()) if t.startswith("images/")}
    assert committed == written
    assert shown == written
