"""The embedded default's secret key: random per install, made once (race-safe), 0600; production needs its own."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from config.settings.secret import install_secret_key

ROOT = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _settings_key(data_dir: Path, module: str = "config.settings.base") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_") and k != "DATABASE_URL"}
    env.update(AIRLOCK_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE=module)
    code = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_first_use_makes_a_private_key_and_later_uses_read_it(tmp_path):
    data = tmp_path / "fresh" / "data"
    key = install_secret_key(data)
    assert len(key) >= 50
    assert _mode(data / "secret_key") == 0o600
    assert _mode(data) == 0o700 and _mode(data.parent) == 0o700
    assert install_secret_key(data) == key


def test_an_existing_loose_key_file_is_tightened(tmp_path):
    key = install_secret_key(tmp_path)
    os.chmod(tmp_path / "secret_key", 0o644)
    assert install_secret_key(tmp_path) == key
    assert _mode(tmp_path / "secret_key") == 0o600


def test_concurrent_first_runs_agree_on_one_key(tmp_path):
    """serve, its worker and a createuser starting at once on a new install must share one key."""
    data = tmp_path / "data"
    code = (
        "import sys; from pathlib import Path; from config.settings.secret import install_secret_key; "
        "print(install_secret_key(Path(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(data)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert keys == {(data / "secret_key").read_text().strip()}
    assert [p.name for p in data.iterdir()] == ["secret_key"]  # no temporary file left behind


@pytest.mark.slow
def test_embedded_settings_use_the_install_key_and_installs_differ(tmp_path):
    first = _settings_key(tmp_path / "a")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == (tmp_path / "a" / "secret_key").read_text().strip()
    assert _settings_key(tmp_path / "a").stdout == first.stdout  # reused, not remade
    second = _settings_key(tmp_path / "b")
    assert second.returncode == 0 and second.stdout != first.stdout


@pytest.mark.slow
def test_production_without_a_key_refuses_and_makes_none(tmp_path):
    result = _settings_key(tmp_path, "config.settings.production")
    assert result.returncode != 0 and "DJANGO_SECRET_KEY" in result.stderr
    assert not (tmp_path / "secret_key").exists()


def test_no_fixed_key_in_the_settings():
    for path in (ROOT / "config" / "settings").glob("*.py"):
        assert "insecure-airlock-dev-key" not in path.read_text(), path
