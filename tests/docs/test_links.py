"""Every link between the README and docs/ lands: the file exists and, with `#anchor`, so does the heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$")
FENCE = re.compile(r"^(```|~~~)")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors on its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a Markdown page offers (repeated headings get -1, -2 as on GitHub)."""
    found: set[str] = set()
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and (m := HEADING.match(line)):
            base = slug(m.group(1))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    found |= set(re.findall(r'<a (?:id|name)="([^"]+)"', text))
    return found


def broken_links(document: Path, text: str) -> list[str]:
    """Relative links from `document` whose file or heading does not exist."""
    bad = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        if not resolved.exists():
            bad.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text(encoding="utf-8")):
            bad.append(target)
    return bad


def test_every_link_between_the_documents_lands():
    problems = {str(d.relative_to(ROOT)): broken_links(d, d.read_text(encoding="utf-8")) for d in documents()}
    assert {name: links for name, links in problems.items() if links} == {}


def test_the_readme_maps_every_document():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    unlisted = [d.name for d in documents()[1:] if f"](docs/{d.name})" not in readme]
    assert unlisted == []


def test_the_checker_finds_a_planted_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# How `serve` serves\n\n## Limits (per tenant)\n\n```sh\n# not a heading\n```\n")
    other = tmp_path / "other.md"
    text = (
        "[ok](page.md#how-serve-serves) [ok](page.md#limits-per-tenant) [bad](page.md#not-a-heading) "
        "[gone](nope.md) [bad](#missing) [web](https://example.org/x#y)"
    )
    other.write_text(text + "\n")
    assert broken_links(other, text) == ["page.md#not-a-heading", "nope.md", "#missing"]
