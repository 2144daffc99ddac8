"""The vendored Uppy is what scripts/build-uppy.sh makes from the pinned release, byte for byte.

Needs no npm: SHA256SUMS (written by the script) lists every vendored file with its digest and the
integrity of the two npm tarballs it came from; these must match the committed files and the lockfile.
`scripts/build-uppy.sh --check` (maintainers, with registry access) proves a fresh build equals them.
"""

import hashlib
import json
from pathlib import Path

from attachments.pages import uppy_locales

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "attachments" / "static" / "airlock" / "vendor" / "uppy"
PINS = ROOT / "scripts" / "uppy"


def _sums() -> tuple[dict[str, str], dict[str, str]]:
    """({relative path: sha256}, {package@version: tarball integrity}) from SHA256SUMS."""
    files, tarballs = {}, {}
    for line in (VENDOR / "SHA256SUMS").read_text().splitlines():
        if line.startswith("# "):
            package, integrity = line[2:].split(" ")
            tarballs[package] = integrity
        elif line:
            digest, path = line.split("  ", 1)
            files[path] = digest
    return files, tarballs


def test_every_vendored_file_matches_its_recorded_digest():
    files, _ = _sums()
    on_disk = {str(p.relative_to(VENDOR)) for p in VENDOR.rglob("*") if p.is_file()} - {"SHA256SUMS", "README.md"}
    assert on_disk == set(files), "files added or removed by hand: run scripts/build-uppy.sh"
    for path, digest in files.items():
        assert hashlib.sha256((VENDOR / path).read_bytes()).hexdigest() == digest, path
    assert {
        "uppy.min.js",
        "uppy.min.css",
        "LICENSE",
        "locales/de_DE.min.js",
        "locales/fr_FR.min.js",
        "locales/es_ES.min.js",
    } <= set(files)
    assert "MIT License" in (VENDOR / "LICENSE").read_text()


def test_the_bundle_comes_from_the_tarballs_the_lockfile_pins():
    _, tarballs = _sums()
    lock = json.loads((PINS / "package-lock.json").read_text())["packages"]
    wanted = json.loads((PINS / "package.json").read_text())["dependencies"]
    pinned = {
        f"{name}@{lock['node_modules/' + name]['version']}": lock["node_modules/" + name]["integrity"]
        for name in wanted
    }
    assert tarballs == pinned
    # One release: the locales are the version the uppy bundle itself depends on.
    assert lock["node_modules/uppy"]["dependencies"]["@uppy/locales"] == wanted["@uppy/locales"]
    assert all(version == lock["node_modules/" + name]["version"] for name, version in wanted.items())


def test_the_page_offers_exactly_the_vendored_locales():
    assert "de_DE" in uppy_locales() and "en_US" in uppy_locales()
    assert len(uppy_locales()) == len(list((VENDOR / "locales").glob("*.min.js")))
