"""Rows of the attachments app that leave the database after their retention window.

The sweeper walks each table from its oldest row and picks the rows past the
window (sweeper/retention.py); these delete what it picked, a batch at a time.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ...models import ClientToken, DeadLetter, OutboxMessage, StorageEvent, Tombstone


def outbox_messages_purge(pks: Collection[Any]) -> None:
    OutboxMessage.objects.filter(pk__in=pks).delete()


def storage_events_purge(pks: Collection[Any]) -> None:
    StorageEvent.objects.filter(pk__in=pks).delete()


def tombstones_purge(pks: Collection[Any]) -> None:
    Tombstone.objects.filter(pk__in=pks).delete()


def dead_letters_purge(pks: Collection[Any]) -> None:
    DeadLetter.objects.filter(pk__in=pks).delete()


def client_tokens_purge(pks: Collection[Any]) -> None:
    ClientToken.objects.filter(pk__in=pks).delete()
