"""processing/spool.py: one download per object per worker, never a copy of other bytes, bounded on disk."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from attachments.storage.base import ObjectInfo
from processing.spool import Spool


class Bucket:
    """A storage gateway without local files: what S3 looks like to the spool."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.gets = 0
        self.heads = 0

    def put(self, key: str, data: bytes, etag: str) -> None:
        self.objects[key] = (data, etag)

    def local_path(self, key: str):
        return None

    def head(self, key: str) -> ObjectInfo | None:
        self.heads += 1
        if key not in self.objects:
            return None
        data, etag = self.objects[key]
        return ObjectInfo(key=key, size=len(data), etag=etag)

    def iter_chunks(self, key: str, *, chunk_size: int = 65536):
        self.gets += 1
        data = self.objects[key][0]
        for start in range(0, len(data), chunk_size):
            yield data[start : start + chunk_size]


@pytest.fixture
def spool() -> Iterator[Spool]:
    made = Spool(keep=2, idle_seconds=600)
    yield made
    made.clear()


def test_a_kept_copy_is_read_by_the_next_stage_without_a_second_download(spool):
    bucket = Bucket()
    bucket.put("k", b"video" * 1000, "e1")
    with spool.held(bucket, "k", limit=5000, keep=True) as scanned:
        assert scanned.read_bytes() == b"video" * 1000
    with spool.held(bucket, "k", limit=5000, keep=False) as derived:
        assert derived == scanned and derived.read_bytes() == b"video" * 1000
    assert bucket.gets == 1 and spool.downloads == 1
    assert not scanned.exists()  # the last reader's copy is gone


def test_other_bytes_under_the_same_key_are_downloaded_again(spool):
    bucket = Bucket()
    bucket.put("k", b"a" * 100, "e1")
    with spool.held(bucket, "k", limit=100, keep=True):
        pass
    bucket.put("k", b"b" * 100, "e2")
    with spool.held(bucket, "k", limit=100, keep=False) as path:
        assert path.read_bytes() == b"b" * 100
    assert bucket.gets == 2


def test_a_reader_that_knows_the_object_asks_no_head(spool):
    bucket = Bucket()
    bucket.put("k", b"v" * 100, "e1")
    with spool.held(bucket, "k", limit=100, keep=True, known=ObjectInfo(key="k", size=100, etag="e1")) as path:
        assert path.read_bytes() == b"v" * 100
    assert (bucket.heads, bucket.gets) == (0, 1)


def test_a_snapshot_known_by_its_size_reuses_the_kept_copy_without_a_head(spool):
    bucket = Bucket()
    bucket.put("snap", b"s" * 100, "e1")
    with spool.held(bucket, "snap", limit=100, keep=True) as scanned:  # the scan: a HEAD, the download
        pass
    with spool.held(bucket, "snap", limit=100, keep=False, known=ObjectInfo(key="snap", size=100)) as derived:
        assert derived == scanned and derived.read_bytes() == b"s" * 100
    assert (bucket.heads, bucket.gets) == (1, 1)


def test_a_kept_copy_of_another_size_is_not_taken_for_a_known_object(spool):
    from processing.errors import TransientError

    bucket = Bucket()
    bucket.put("snap", b"s" * 100, "e1")
    with spool.held(bucket, "snap", limit=100, keep=True):
        pass
    # The row says 90 bytes: the copy of 100 is not it, and the download that follows does not match either.
    with pytest.raises(TransientError), spool.held(bucket, "snap", limit=100, keep=False, known=ObjectInfo("snap", 90)):
        pass
    assert bucket.gets == 2


def test_a_reader_that_failed_leaves_no_copy_behind(spool):
    bucket = Bucket()
    bucket.put("k", b"x" * 100, "e1")
    with pytest.raises(RuntimeError), spool.held(bucket, "k", limit=100, keep=True) as path:
        raise RuntimeError("scan failed")
    assert not path.exists()
    with spool.held(bucket, "k", limit=100, keep=False):
        pass
    assert bucket.gets == 2


def test_an_object_larger_than_measured_is_not_downloaded(spool):
    from processing.errors import TransientError

    bucket = Bucket()
    bucket.put("k", b"x" * 101, "e1")
    with pytest.raises(TransientError), spool.held(bucket, "k", limit=100, keep=False):
        pass
    assert bucket.gets == 0


def test_idle_copies_are_bounded(spool):
    bucket = Bucket()
    paths = []
    for n in range(4):
        bucket.put(f"k{n}", bytes([n]) * 100, "e")
        with spool.held(bucket, f"k{n}", limit=100, keep=True) as path:
            paths.append(path)
    # keep=2: the two oldest a next stage never took are gone, the newest two wait.
    assert [p.exists() for p in paths] == [False, False, True, True]


def test_a_copy_idle_too_long_is_not_kept():
    spool = Spool(keep=5, idle_seconds=0)
    bucket = Bucket()
    bucket.put("k", b"x" * 100, "e1")
    with spool.held(bucket, "k", limit=100, keep=True) as path:
        pass
    with spool.held(bucket, "k", limit=100, keep=False):
        assert not path.exists()
    assert bucket.gets == 2


def _killed_worker_spool(tmp_path) -> tuple[int, str]:
    """A child process makes its spool with a copy in it and is killed with SIGKILL (no atexit)."""
    import subprocess
    import sys

    code = (
        "import os, signal, sys, tempfile\n"
        "tempfile.tempdir = sys.argv[1]\n"
        "from processing.spool import Spool\n"
        "d = Spool(keep=2, idle_seconds=600)._directory()\n"
        "(d / 'object-x').write_bytes(b'v' * 4096)\n"
        "print(d, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.strip()


def test_a_killed_workers_spool_is_removed_at_the_next_start_and_a_living_ones_is_kept(tmp_path, monkeypatch):
    import tempfile
    from pathlib import Path

    from processing.spool import remove_leftovers

    returncode, left = _killed_worker_spool(tmp_path)
    assert returncode == -9 and Path(left).is_dir() and (Path(left) / "object-x").is_file()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    living = Spool(keep=2, idle_seconds=600)
    mine = living._directory()
    assert mine.parent == tmp_path
    assert remove_leftovers(tmp_path) == [Path(left)]
    assert not Path(left).exists() and mine.is_dir()
    assert remove_leftovers(tmp_path) == []  # a living process's lock holds


def test_a_spool_without_an_owner_file_is_removed_only_when_old(tmp_path):
    import time

    from processing.spool import UNOWNED_GRACE_SECONDS, remove_leftovers

    older = tmp_path / "airlock-spool-old"
    older.mkdir()
    (tmp_path / "not-a-spool").mkdir()
    now = time.time()
    assert remove_leftovers(tmp_path, now=now) == []
    assert remove_leftovers(tmp_path, now=now + UNOWNED_GRACE_SECONDS + 1) == [older]
    assert (tmp_path / "not-a-spool").is_dir()


def test_workers_remove_leftover_spools_at_boot(settings):
    assert "processing.worker_boot.SpoolLeftovers" in settings.DRAMATIQ_BROKER["MIDDLEWARE"]
