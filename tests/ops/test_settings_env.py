"""A bad AIRLOCK_* value stops the process at start, naming the variable (config/settings/env.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings.env import env_bool, env_float, env_int, env_optional_int
from tests.ops.conftest import ROOT
from tests.support.env import with_group_keys


@pytest.mark.parametrize(
    "read, value, complaint",
    [
        (lambda: env_int("AIRLOCK_X", 5), "five", "AIRLOCK_X must be a whole number, not 'five'"),
        (lambda: env_int("AIRLOCK_X", 5), "2.5", "AIRLOCK_X must be a whole number, not '2.5'"),
        (lambda: env_int("AIRLOCK_X", 5, low=1), "0", "AIRLOCK_X must be at least 1, not 0"),
        (lambda: env_int("AIRLOCK_X", 5, high=9), "10", "AIRLOCK_X must be at most 9, not 10"),
        (lambda: env_int("AIRLOCK_X", 5, low=1, high=9), "10", "AIRLOCK_X must be between 1 and 9, not 10"),
        (lambda: env_optional_int("AIRLOCK_X", low=0), "-1", "AIRLOCK_X must be at least 0, not -1"),
        (lambda: env_float("AIRLOCK_X", 1.0), "soon", "AIRLOCK_X must be a number, not 'soon'"),
        (lambda: env_float("AIRLOCK_X", 1.0), "nan", "AIRLOCK_X must be a finite number, not 'nan'"),
        (lambda: env_float("AIRLOCK_X", 1.0, low=0.1), "0.05", "AIRLOCK_X must be at least 0.1, not 0.05"),
        (lambda: env_bool("AIRLOCK_X"), "maybe", "AIRLOCK_X must be 1/true/yes/on or 0/false/no/off, not 'maybe'"),
    ],
)
def test_a_bad_value_is_refused_with_the_variables_name(monkeypatch, read, value, complaint):
    monkeypatch.setenv("AIRLOCK_X", value)
    with pytest.raises(ImproperlyConfigured) as refused:
        read()
    assert str(refused.value) == complaint


def test_good_values_unset_and_empty_read_as_before(monkeypatch):
    monkeypatch.delenv("AIRLOCK_X", raising=False)
    assert (env_int("AIRLOCK_X", 5, low=1), env_optional_int("AIRLOCK_X"), env_bool("AIRLOCK_X", True)) == (
        5,
        None,
        True,
    )
    monkeypatch.setenv("AIRLOCK_X", "")
    assert (env_int("AIRLOCK_X", 5, low=1), env_float("AIRLOCK_X", 2.5), env_optional_int("AIRLOCK_X")) == (
        5,
        2.5,
        None,
    )
    monkeypatch.setenv("AIRLOCK_X", " 7 ")
    assert (env_int("AIRLOCK_X", 5, low=1, high=7), env_float("AIRLOCK_X", 1.0), env_optional_int("AIRLOCK_X")) == (
        7,
        7.0,
        7,
    )
    for word, meaning in (("1", True), ("Yes", True), ("on", True), ("0", False), ("false", False), ("OFF", False)):
        monkeypatch.setenv("AIRLOCK_X", word)
        assert env_bool("AIRLOCK_X") is meaning


@pytest.mark.slow
@pytest.mark.parametrize(
    "group, keys, complaint",
    [
        ("AIRLOCK_SWEEP", {"batch": "lots"}, "AIRLOCK_SWEEP batch must be a whole number, not 'lots'"),
        ("AIRLOCK_SERVE", {"web_threads": "0"}, "AIRLOCK_SERVE web_threads must be at least 1, not 0"),
        ("AIRLOCK_TENANT_QUOTA", {"bytes": "-5"}, "AIRLOCK_TENANT_QUOTA bytes must be at least 0, not -5"),
        ("AIRLOCK_METRICS", {"tenant_labels": "sure"}, "AIRLOCK_METRICS tenant_labels must be 1/true/yes/on"),
    ],
)
def test_the_server_does_not_start_with_a_bad_value(group, keys, complaint):
    result = subprocess.run(  # noqa: PLW1510 - the returncode is the point
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=with_group_keys(dict(os.environ), group, **keys),
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and complaint in result.stderr
