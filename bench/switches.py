"""The speed tricks a bench turns off by name, to measure one figure with and without each in one run.

    with switches.off("shared_serializer"):
        ...  # requests made here build a fresh serializer each

A trick is turned off by replacing, in this process, the function that holds it with
the plain way; `server_warm_up` lives in the sandbox's fork server, so it is turned off
in the fork servers this process starts inside the block. Product code has no switch:
unpatched, every trick is on.

  insert_reserving      the intent's one-statement INSERT (attachments/uploads/services/fastpath_insert.py)
  shared_serializer     one serializer instance per class (attachments/api/fastpath_serializer.py)
  webhook_async_commit  delivery bookkeeping without the WAL flush (webhooks/services/fastpath_commit.py)
  server_warm_up        the fork server's decoder warm-up (processing/sandbox/warmup.py)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

TRICKS = ("insert_reserving", "shared_serializer", "webhook_async_commit", "server_warm_up")

# Prefixed to the fork server's program: warm_up() becomes a no-op before preload() calls it.
_NO_WARM_UP = (
    "import sys; sys.path.insert(0, sys.argv[1]); import processing.sandbox.warmup as w; w.warm_up = lambda: None; "
)


def _replacements(name: str) -> list[tuple[Any, str, Any]]:
    """(module, attribute, plain replacement) for one trick."""
    if name == "insert_reserving":
        from attachments.uploads.services import intents

        return [(intents, "attachment_insert_reserving", lambda attachment, audit, **_: False)]
    if name == "shared_serializer":
        from attachments.api import fastpath_serializer

        return [(fastpath_serializer, "_shared", lambda serializer_class: serializer_class())]
    if name == "webhook_async_commit":
        from django.db import transaction

        from webhooks.services import delivery

        return [(delivery, "bookkeeping", transaction.atomic)]
    if name == "server_warm_up":
        from processing.sandbox import runner

        return [(runner, "_BOOT", _NO_WARM_UP + runner._BOOT)]
    raise ValueError(f"unknown trick {name!r} (known: {', '.join(TRICKS)})")


def names(value: str | Iterable[str]) -> list[str]:
    """'a,b' or ['a', 'b'] -> ['a', 'b'], empty names dropped."""
    items = value.split(",") if isinstance(value, str) else list(value)
    return [item.strip() for item in items if item.strip()]


@contextmanager
def off(value: str | Iterable[str]) -> Iterator[None]:
    """Inside the block, the named tricks are off ('' or []: all on)."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for name in names(value):
            for module, attribute, plain in _replacements(name):
                saved.append((module, attribute, getattr(module, attribute)))
                setattr(module, attribute, plain)
        yield
    finally:
        for module, attribute, original in reversed(saved):
            setattr(module, attribute, original)
