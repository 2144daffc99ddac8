"""Local storage: an object is named only after its bytes are on disk, and its name is synced after.

A power cut cannot be simulated here, so these tests record the calls instead:
os.fsync and os.replace are wrapped, and each fsync is resolved to the path its
descriptor names (/proc/self/fd). The order is the promise: fsync the file,
rename it, fsync its directory (and every parent that gained a new directory).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attachments.storage.local import LocalGateway


@pytest.fixture
def calls(monkeypatch):
    seen: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        seen.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:
        seen.append(("replace", f"{src} -> {dst}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return seen


def test_write_chunks_syncs_the_temp_file_then_renames_then_syncs_the_directories(tmp_path, calls):
    root = tmp_path / "objects"
    root.mkdir()
    gateway = LocalGateway(root)
    assert gateway.write_chunks("acme/ab/one", [b"hello ", b"world"]) == 11
    final = root / "acme" / "ab" / "one"
    assert final.read_bytes() == b"hello world"
    (kind, temp), (rename, moved), *dirs = calls
    assert kind == "fsync" and Path(temp).parent == final.parent and Path(temp).name.startswith(".upload-")
    assert rename == "replace" and moved == f"{temp} -> {final}"
    # Its directory, then each parent whose new subdirectory must survive too (acme/ab, acme, the root).
    assert dirs == [("fsync", str(final.parent)), ("fsync", str(root / "acme")), ("fsync", str(root))]

    calls.clear()  # a second object in an existing directory: only that directory's entry is new
    gateway.write_chunks("acme/ab/two", [b"x"])
    assert [kind for kind, _ in calls] == ["fsync", "replace", "fsync"]
    assert calls[-1] == ("fsync", str(final.parent))


def test_move_file_in_syncs_the_callers_file_before_renaming_it(tmp_path, calls):
    root = tmp_path / "objects"
    gateway = LocalGateway(root)
    scratch = gateway.scratch_dir() / "result.bin"
    scratch.write_bytes(b"made by the sandbox")
    calls.clear()
    assert gateway.move_file_in("acme/cd/three", scratch) == 19
    final = root / "acme" / "cd" / "three"
    assert calls[0] == ("fsync", str(scratch))
    assert calls[1] == ("replace", f"{scratch} -> {final}")
    assert calls[2] == ("fsync", str(final.parent))
    assert final.read_bytes() == b"made by the sandbox" and (final.stat().st_mode & 0o777) == 0o600


def test_a_failed_write_is_neither_named_nor_synced_as_an_object(tmp_path, calls):
    gateway = LocalGateway(tmp_path)

    def body():
        yield b"part"
        raise ValueError("the body grew past its limit")

    with pytest.raises(ValueError):
        gateway.write_chunks("acme/ef/four", body())
    assert not any(kind == "replace" for kind, _ in calls)
    assert list((tmp_path / "acme" / "ef").iterdir()) == []  # the temp file is gone too
