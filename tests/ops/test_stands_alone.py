"""The repository stands alone: its documents link only to its own files, and nothing names a place outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "files"  # binary samples
TEXT_SUFFIXES = {
    ".py",
    ".sh",
    ".md",
    ".toml",
    ".txt",
    ".cfg",
    ".ini",
    ".json",
    ".html",
    ".js",
    ".css",
    ".template",
    ".yml",
    ".yaml",
    "",
}
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _project_files() -> list[Path]:
    """The repository's own files: what git tracks or would add, never what runs leave behind."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
        return [ROOT / name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # an export without .git: skip hidden and run-time folders
        return [
            p
            for p in ROOT.rglob("*")
            if not any(
                part.startswith(".") and part != ".ci" or part in {"var", "__pycache__"}
                for part in p.relative_to(ROOT).parts
            )
        ]


def _text_files() -> list[Path]:
    return [
        path
        for path in _project_files()
        if path.is_file() and CORPUS not in path.parents and path.suffix in TEXT_SUFFIXES
    ]


def bad_links(document: Path, text: str) -> list[str]:
    """Relative links that leave the repository or point at nothing."""
    bad = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same page
        resolved = (document.parent / target.split("#", 1)[0]).resolve()
        if ROOT not in resolved.parents or not resolved.exists():
            bad.append(target)
    return bad


# Spelled in two halves so that this file itself never contains the name it looks for
# (the check is a plain grep over the tree).
SIBLING = ".." + "/shared"


def outside_references(text: str) -> list[str]:
    """Mentions of the sibling design folder or of this checkout's own absolute path."""
    found = re.findall(re.escape(SIBLING) + r"\b", text)
    found += [str(ROOT)] if str(ROOT) in text else []
    return found


def test_documents_link_only_to_files_in_the_repository():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert ROOT / "docs" / "api.md" in documents
    problems = {str(d.relative_to(ROOT)): bad_links(d, d.read_text(encoding="utf-8")) for d in documents}
    assert {name: links for name, links in problems.items() if links} == {}


def test_nothing_names_a_place_outside_the_repository():
    files = _text_files()
    assert ROOT / "scripts" / "test" in files and ROOT / ".ci" / "run" in files
    problems = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if found := outside_references(text):
            problems[str(path.relative_to(ROOT))] = found
    assert problems == {}


def test_the_checks_see_what_they_look_for():
    readme = ROOT / "README.md"
    assert bad_links(readme, f"The contract is [API.md]({SIBLING}/API.md).") == [f"{SIBLING}/API.md"]
    assert bad_links(readme, "[gone](docs/nope.md) [ok](docs/api.md#errors) [web](https://example.org)") == [
        "docs/nope.md"
    ]
    assert outside_references(f"MANIFEST = '{SIBLING}/corpus/MANIFEST.tsv'") == [SIBLING]
    assert outside_references(f"CORPUS = '{ROOT}/tests/corpus'") == [str(ROOT)]
    assert outside_references("CORPUS = Path(__file__).parent / 'files'") == []
