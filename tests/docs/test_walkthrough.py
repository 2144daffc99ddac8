"""The README's curl walk-through works as printed, pasted into a shell against a running `serve`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from PIL import Image

from tests.support.processes import Server

ROOT = Path(__file__).resolve().parents[2]


def walkthrough() -> str:
    """The first shell block after the README's "Upload a file with curl" heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Upload a file with curl", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


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
        assert done.stdout.splitlines()[0] == "ready None"  # step 3 prints status and reason
        committed = json.loads(done.stdout.splitlines()[-1])  # step 5 prints the commit's answer
        assert committed["ref"] == "listing:42" and len(committed["committed"]) == 1
        with Image.open(folder / "download.png") as image:
            assert image.size == (48, 32)
        with Image.open(folder / "thumbnail.webp") as thumb:
            assert thumb.format == "WEBP"
    finally:
        server.stop()
