"""Grouped variables in a child process's environment (`AIRLOCK_RETRIES=max_attempts=2,lease_seconds=8`).

An environment built from os.environ may already carry a group (an operator's, CI's):
setting a few of its keys must keep the others (bench/common.py uses this too).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TypeVar

# Variables for a child process on top of another environment: a value, None (unset),
# or {key: value} for keys of a grouped variable ({"AIRLOCK_SERVE": {"web_processes": 1}}).
EnvExtra = Mapping[str, str | Mapping[str, object] | None]
E = TypeVar("E", bound=MutableMapping[str, str])


def with_group_keys(env: E, group: str, /, **keys: object) -> E:
    """Set `keys` in env's grouped variable `group` and return env (changed in place).

    The keys given win, the keys already there stay; a key given as None is taken out
    (and the variable with it when no key is left).
    """
    pairs: dict[str, str] = {}
    for item in env.get(group, "").split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if sep:
            pairs[name.lower()] = value
    for name, value in keys.items():
        if value is None:
            pairs.pop(name, None)
        else:
            pairs[name] = str(value)
    if pairs:
        env[group] = ",".join(f"{name}={value}" for name, value in pairs.items())
    else:
        env.pop(group, None)
    return env


def update_env(env: E, extra: EnvExtra) -> E:
    """env with `extra` on top (changed in place): a value replaces, None takes the variable out,
    and a mapping sets those keys of a grouped variable (with_group_keys)."""
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        elif isinstance(value, Mapping):
            with_group_keys(env, name, **value)
        else:
            env[name] = value
    return env
