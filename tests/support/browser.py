"""Debian's Chromium under Playwright, launched one way for the browser tests and scripts/screenshots.py.

No Django and no pytest here: scripts/screenshots.py uses it as it is.
"""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = os.environ.get("AIRLOCK_CHROMIUM", "/usr/bin/chromium")
# Headless flags that work on a machine with no network beyond the loopback.
# Playwright adds a new empty --user-data-dir for every launch.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch_chromium(playwright):
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"Chromium not found at {CHROMIUM}: apt-get install chromium (Debian)")
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
