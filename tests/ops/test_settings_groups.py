"""Grouped variables (config/settings/env.py env_group) and the one table that documents every variable."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import env
from config.settings.env import Group, Key, env_group, env_object
from config.settings.env import key as group_key
from tests.ops.conftest import ROOT

KEYS = {
    "depth": Key(3, low=0, was="AIRLOCK_X_DEPTH"),
    "ratio": Key(100.0, float, low=1.0),
    "strict": Key(True, bool),
    "cap": Key(None, low=0),
}


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in ("AIRLOCK_X", "AIRLOCK_X_DEPTH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(env, "RENAMED_IN_USE", [])
    monkeypatch.setattr(env, "GROUPS", dict(env.GROUPS))  # this file's AIRLOCK_X leaves the real ones alone


def test_unset_is_every_default():
    assert env_group("AIRLOCK_X", KEYS) == {"depth": 3, "ratio": 100.0, "strict": True, "cap": None}


def test_keys_given_are_typed_and_the_rest_keep_their_defaults(monkeypatch):
    monkeypatch.setenv("AIRLOCK_X", " depth=0, STRICT=off,cap=7 ,")
    assert env_group("AIRLOCK_X", KEYS) == {"depth": 0, "ratio": 100.0, "strict": False, "cap": 7}


@pytest.mark.parametrize(
    "value, complaint",
    [
        ("depth=-1", "AIRLOCK_X depth must be at least 0, not -1"),
        ("ratio=0.5", "AIRLOCK_X ratio must be at least 1.0, not 0.5"),
        ("depth=two", "AIRLOCK_X depth must be a whole number, not 'two'"),
        ("strict=maybe", "AIRLOCK_X strict must be 1/true/yes/on or 0/false/no/off, not 'maybe'"),
        ("dpth=1", "AIRLOCK_X takes key=value pairs with the keys depth, ratio, strict, cap, not 'dpth=1'"),
        ("depth", "AIRLOCK_X takes key=value pairs with the keys depth, ratio, strict, cap, not 'depth'"),
        ("depth=1,depth=2", "AIRLOCK_X sets depth twice"),
    ],
)
def test_a_bad_pair_stops_the_process_naming_the_variable_and_key(monkeypatch, value, complaint):
    monkeypatch.setenv("AIRLOCK_X", value)
    with pytest.raises(ImproperlyConfigured) as refused:
        env_group("AIRLOCK_X", KEYS)
    assert str(refused.value) == complaint


def test_a_renamed_variable_is_still_read_and_reported(monkeypatch):
    monkeypatch.setenv("AIRLOCK_X_DEPTH", "5")
    assert env_group("AIRLOCK_X", KEYS)["depth"] == 5
    assert env.RENAMED_IN_USE == [("AIRLOCK_X_DEPTH", "AIRLOCK_X=depth=…")]


def test_the_group_wins_over_the_renamed_variable(monkeypatch):
    monkeypatch.setenv("AIRLOCK_X_DEPTH", "5")
    monkeypatch.setenv("AIRLOCK_X", "depth=1")
    assert env_group("AIRLOCK_X", KEYS)["depth"] == 1
    assert env.RENAMED_IN_USE == [("AIRLOCK_X_DEPTH", "AIRLOCK_X=depth=…")]


def test_a_renamed_variable_keeps_its_range(monkeypatch):
    monkeypatch.setenv("AIRLOCK_X_DEPTH", "-2")
    with pytest.raises(ImproperlyConfigured, match="^AIRLOCK_X_DEPTH must be at least 0, not -2$"):
        env_group("AIRLOCK_X", KEYS)


def _settings_of(extra_env: dict[str, str], *names: str) -> tuple[dict, str]:
    code = (
        "import json; from django.conf import settings; "
        "from operator import attrgetter; "
        f"print(json.dumps({{n: attrgetter(n)(settings) for n in {list(names)!r}}}))"
    )
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    run_env.update(DJANGO_SETTINGS_MODULE="config.settings.base", **extra_env)
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_grouped_variable_reaches_the_running_settings():
    values, stderr = _settings_of(
        {"AIRLOCK_SERVE": "web_threads=7", "AIRLOCK_RETENTION_DAYS": "tombstones=730,login_log=14"},
        "AIRLOCK_SERVE.web_threads",
        "AIRLOCK_SERVE.web_processes",
        "AIRLOCK_RETENTION_DAYS.tombstones",
        "AIRLOCK_RETENTION_DAYS.login_log",
        "AIRLOCK_HTTP_LIMITS.threads_per_address",
    )
    assert values == {
        "AIRLOCK_SERVE.web_threads": 7,
        "AIRLOCK_SERVE.web_processes": 2,
        "AIRLOCK_RETENTION_DAYS.tombstones": 730,
        "AIRLOCK_RETENTION_DAYS.login_log": 14,
        "AIRLOCK_HTTP_LIMITS.threads_per_address": 3,  # its default follows web_threads
    }
    assert "is read as" not in stderr


def test_a_deployment_on_the_old_names_keeps_working_and_is_told_where_they_went():
    values, stderr = _settings_of(
        {"AIRLOCK_WEB_PROCESSES": "3", "AIRLOCK_ZIP_MAX_DEPTH": "1"},
        "AIRLOCK_SERVE.web_processes",
        "AIRLOCK_DECODE_LIMITS.zip_depth",
    )
    assert values == {"AIRLOCK_SERVE.web_processes": 3, "AIRLOCK_DECODE_LIMITS.zip_depth": 1}
    warned = [json.loads(line) for line in stderr.splitlines() if '"airlock.settings"' in line]
    assert sorted((w["level"], w["variable"], w["now"]) for w in warned) == [
        ("warning", "AIRLOCK_WEB_PROCESSES", "AIRLOCK_SERVE=web_processes=…"),
        ("warning", "AIRLOCK_ZIP_MAX_DEPTH", "AIRLOCK_DECODE_LIMITS=zip_depth=…"),
    ]
    assert all(w["event"].endswith("; set that instead") for w in warned)


@dataclasses.dataclass(frozen=True)
class X(Group):
    depth: int = group_key(3, low=0, was="AIRLOCK_X_DEPTH")
    ratio: float = group_key(100.0, low=1.0)
    strict: bool = group_key(True)
    cap: int | None = group_key(None, low=0)


def test_a_group_object_has_typed_keys_from_its_fields(monkeypatch):
    assert env_object("AIRLOCK_X", X) == X(depth=3, ratio=100.0, strict=True, cap=None)
    monkeypatch.setenv("AIRLOCK_X", "ratio=2,strict=no,cap=9")
    monkeypatch.setenv("AIRLOCK_X_DEPTH", "4")
    assert env_object("AIRLOCK_X", X) == X(depth=4, ratio=2.0, strict=False, cap=9)
    assert env.RENAMED_IN_USE == [("AIRLOCK_X_DEPTH", "AIRLOCK_X=depth=…")]
    monkeypatch.setenv("AIRLOCK_X", "ratio=0.5")
    with pytest.raises(ImproperlyConfigured, match="^AIRLOCK_X ratio must be at least 1.0, not 0.5$"):
        env_object("AIRLOCK_X", X)


def test_a_group_object_is_frozen_and_replace_makes_a_changed_copy():
    limits = env_object("AIRLOCK_X", X)
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.depth = 1  # type: ignore[misc]
    changed = limits.replace(depth=1)
    assert (changed.depth, changed.ratio, limits.depth) == (1, 100.0, 3)
    with pytest.raises(TypeError):
        limits.replace(dpth=1)


def test_a_test_changes_one_key_of_a_setting(settings):
    settings.AIRLOCK_DECODE_LIMITS = settings.AIRLOCK_DECODE_LIMITS.replace(zip_depth=0)
    from processing.sandbox_config import bounds_from_settings

    assert settings.AIRLOCK_DECODE_LIMITS.zip_depth == 0
    assert settings.AIRLOCK_DECODE_LIMITS.pdf_pages == 2000  # the rest as they were
    assert bounds_from_settings().zip_max_depth == 0


# --- the one table ------------------------------------------------------------

CONFIGURATION = ROOT / "docs" / "configuration.md"


def _read_by_settings() -> set[str]:
    """Every AIRLOCK_* variable the settings modules read, as a plain or a grouped variable."""
    names: set[str] = set()
    for path in (ROOT / "config" / "settings").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id.startswith("env_")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("AIRLOCK_")
            ):
                names.add(node.args[0].value)
    return names


def _table() -> dict[str, str]:
    """First cell's variables → the row, in the main table (before the renamed list)."""
    text = CONFIGURATION.read_text().split("## Renamed variables")[0]
    rows: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1]):
                rows[name] = line
    return rows


def test_every_variable_the_settings_read_is_in_the_table():
    read = _read_by_settings()
    assert "AIRLOCK_DECODE_LIMITS" in read and "AIRLOCK_HTTPS" in read  # the scan sees groups, production's too
    assert sorted(read - set(_table())) == []


def test_each_grouped_variable_documents_every_key_and_its_default():
    from django.conf import settings  # noqa: F401  (the settings are loaded, so env.GROUPS is filled)

    table = _table()
    for name, keys in env.GROUPS.items():
        row = table[name]
        for key, spec in keys.items():
            assert f"`{key}`" in row, (name, key)
            if spec.default is not None and not isinstance(spec.default, bool):
                assert re.search(rf"`{key}=", row) or f"`{key}` =" in row, (name, key)


def test_every_renamed_variable_has_its_row():
    from django.conf import settings  # noqa: F401

    renamed = CONFIGURATION.read_text().split("## Renamed variables")[1]
    for name, keys in env.GROUPS.items():
        for key, spec in keys.items():
            if spec.was:
                assert f"| `{spec.was}` | `{name}` `{key}` |" in renamed


def test_the_table_has_at_most_sixty_airlock_variables():
    names = {name for name in _table() if name.startswith("AIRLOCK_")}
    assert len(names) <= 60, sorted(names)
