"""The sweeper's brakes as attachments' services see them, without importing the sweeper.

The brakes (killswitch, dry run) belong to the sweeper, which sits above this
app; it registers how to read them when it is ready (sweeper.apps). The
services that delete on their own (an object no intent authorized, abandoned
multipart uploads) ask here, so every automated delete obeys the same brakes.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

_reader: Callable[[], str] | None = None


def register_delete_brake(reader: Callable[[], str]) -> None:
    global _reader
    _reader = reader


def delete_brake() -> str:
    """ "killswitch", "dry_run", or "" (go ahead): see sweeper.control.delete_brake."""
    if _reader is None:  # never delete when nobody can say whether the brakes are on
        raise ImproperlyConfigured("no delete brake registered: is the sweeper app installed?")
    return _reader()
