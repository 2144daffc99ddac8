"""bench/switches.py turns a named speed trick off inside a block and back on after it; product code has no switch."""

from __future__ import annotations

import pytest

from attachments.api import fastpath_serializer
from attachments.api.serializers import AttachmentOutputSerializer
from bench import switches
from processing.sandbox import runner


def test_off_swaps_the_trick_for_the_plain_way_and_restores_it():
    shared = fastpath_serializer._shared(AttachmentOutputSerializer)
    with switches.off("shared_serializer"):
        assert fastpath_serializer._shared(AttachmentOutputSerializer) is not shared  # a fresh one per call
    assert fastpath_serializer._shared(AttachmentOutputSerializer) is shared


def test_the_fork_servers_warm_up_is_turned_off_in_servers_started_inside_the_block():
    boot = runner._BOOT
    with switches.off(["server_warm_up"]):
        assert runner._BOOT.endswith(boot) and "warm_up = lambda: None" in runner._BOOT
    assert runner._BOOT == boot


def test_an_unknown_trick_is_refused_and_nothing_stays_off():
    boot = runner._BOOT
    with pytest.raises(ValueError, match="unknown trick 'insert'"), switches.off("server_warm_up,insert"):
        pass
    assert runner._BOOT == boot
    assert switches.names("") == [] and switches.names("a, b,") == ["a", "b"]


def test_product_code_has_no_bench_switch():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    product = [
        p
        for app in ("attachments", "processing", "sweeper", "ops", "webhooks", "config")
        for p in (root / app).rglob("*.py")
    ]
    assert [str(p) for p in product if "BENCH_DISABLE" in p.read_text() or "benchswitch" in p.read_text()] == []
