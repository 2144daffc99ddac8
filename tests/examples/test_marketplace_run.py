"""examples/marketplace/run.sh as its README says to use it: from Airlock's own environment (runtime
dependencies only for what the host runs), it makes the marketplace's environment and starts both.

The marketplace's environment is made fresh here (a venv holding nothing), so the test proves the
example needs none of Airlock's test extras: what it imports (Django, the Python client, httpx)
run.sh installs itself. run.sh always runs Airlock on the embedded default, whatever the mode.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.processes import REPO, free_port, wait_healthy

pytestmark = [pytest.mark.slow]

RUN = REPO / "examples" / "marketplace" / "run.sh"


@pytest.fixture(scope="module")
def host_venv(tmp_path_factory) -> Path:
    """The marketplace's environment as run.sh --setup makes it on a first run."""
    venv = tmp_path_factory.mktemp("marketplace-env") / "venv"
    env = {**os.environ, "MARKETPLACE_VENV": str(venv)}
    done = subprocess.run([str(RUN), "--setup"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def test_setup_makes_an_environment_with_what_the_marketplace_imports_and_no_test_extras(host_venv):
    python = str(host_venv / "bin" / "python")
    imports = subprocess.run(
        [python, "-I", "-c", "import django, httpx, airlock_client; print(airlock_client.__file__)"],
        capture_output=True,
        text=True,
    )
    assert imports.returncode == 0, imports.stderr
    assert imports.stdout.strip().startswith(str(REPO / "clients" / "python"))  # this repository's client
    for absent in ("pytest", "playwright", "attachments"):
        probe = subprocess.run([python, "-I", "-c", f"import {absent}"], capture_output=True, text=True)
        assert probe.returncode != 0, f"{absent} should not be in the marketplace's environment"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}  # the example's own settings
    check = subprocess.run(
        [python, "examples/marketplace/manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr


@pytest.fixture
def running(host_venv, tmp_path) -> Iterator[tuple[str, str, Path]]:
    airlock, market = free_port(), free_port()
    env = {
        **os.environ,
        "MARKETPLACE_VENV": str(host_venv),
        "MARKETPLACE_VAR": str(tmp_path / "var"),
        "AIRLOCK_PORT": str(airlock),
        "MARKETPLACE_PORT": str(market),
    }
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(RUN)], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield f"http://127.0.0.1:{airlock}", f"http://127.0.0.1:{market}", log
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # run.sh's own group: the script, serve and the marketplace
        proc.wait(timeout=30)


def test_run_starts_airlock_and_the_marketplace_wired_together(running):
    airlock, market, log = running
    assert wait_healthy(airlock, timeout=120), log.read_text()[-3000:]
    assert wait_healthy(market, timeout=120), log.read_text()[-3000:]
    home = requests.get(f"{market}/", timeout=10)
    assert home.status_code == 200 and "New ad" in home.text
    # The marketplace's own token works against this Airlock (runmarketplace checked it at start).
    token = (log.parent / "var" / "token").read_text().strip()
    usage = requests.get(f"{airlock}/api/v1/usage", headers={"Authorization": f"Token {token}"}, timeout=10)
    assert usage.status_code == 200, usage.text
