"""AIRLOCK_BENCH_DISABLE names the tricks a bench turns off; unset, every trick is on."""

from __future__ import annotations

from attachments.benchswitch import trick_on


def test_tricks_are_on_unless_named(monkeypatch):
    monkeypatch.delenv("AIRLOCK_BENCH_DISABLE", raising=False)
    assert trick_on("insert_reserving")
    monkeypatch.setenv("AIRLOCK_BENCH_DISABLE", "shared_serializer,insert_reserving")
    assert not trick_on("insert_reserving") and not trick_on("shared_serializer")
    assert trick_on("webhook_async_commit") and trick_on("insert")  # whole names only
