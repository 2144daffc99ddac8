"""The README's curl walk-through works as printed, pasted into a shell against a running `serve`."""

from __future__ import annotations

import io
import json
import re
import subprocess
import urllib.request
from pathlib import Path
from xml.etree import ElementTree

from PIL import Image

from tests.support.processes import Server

ROOT = Path(__file__).resolve().parents[2]


def walkthrough() -> str:
    """The shell blocks of the README's "Upload a file with curl" section, one after another (steps 0-6)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Upload a file with curl", 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"```sh\n(.*?)```", section, re.S))


def test_the_readme_walkthrough_runs_as_printed(tmp_path):
    script = walkthrough()
    assert "TOKEN=..." in script and "API=http://127.0.0.1:8000/api/v1" in script
    (tmp_path / "serve").mkdir()
    server = Server(tmp_path / "serve", {})
    try:
        token = server.createuser("alice", "acme")
        pasted = script.replace("TOKEN=...", f"TOKEN={token}").replace("127.0.0.1:8000", f"127.0.0.1:{server.port}")
        folder = tmp_path / "walk"
        folder.mkdir()
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", pasted], cwd=folder, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "ready None"  # step 3 prints status and reason
        committed = json.loads(lines[1])  # step 5 prints the commit's answer
        assert committed["ref"] == "listing:42" and len(committed["committed"]) == 1
        # Step 6: the upload link's address and its QR code's, then the QR code itself.
        link = json.loads((folder / "link.json").read_text())
        assert lines[2:] == [link["url"], link["qr_svg_url"]]
        assert link["url"].startswith(f"http://127.0.0.1:{server.port}/l/")
        svg = ElementTree.parse(folder / "qr.svg").getroot()
        assert svg.tag == "{http://www.w3.org/2000/svg}svg"
        assert len(svg.findall(".//{http://www.w3.org/2000/svg}path")) >= 1
        # The page it encodes is the guest's, and the printable PNG answers too.
        with urllib.request.urlopen(link["url"], timeout=30) as page:
            assert page.status == 200 and "Anna &amp; Ben" in page.read().decode()
        with urllib.request.urlopen(link["qr_png_url"], timeout=30) as answer:
            assert answer.headers["Content-Type"] == "image/png"
            with Image.open(io.BytesIO(answer.read())) as qr:
                assert qr.format == "PNG" and qr.size[0] == qr.size[1] >= 21 * 10
        with Image.open(folder / "download.png") as image:
            assert image.size == (48, 32)
        with Image.open(folder / "thumbnail.webp") as thumb:
            assert thumb.format == "WEBP"
    finally:
        server.stop()
