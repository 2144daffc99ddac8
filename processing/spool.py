"""One local copy of an object under processing, read by every stage of this process that needs the bytes.

Storage without local files (S3) made each reader fetch the object again: the scan
once per scanner, derive once more to hand the sandbox a file; a 1 GiB video crossed
the wire three times. Here the first reader downloads it once into this process's
private spool directory, and the scanners, the probe, the poster and the remux all
read that file. The copy outlives intake (which runs the scan) because derive, the next
job, usually runs in this same process; it is used only for the object it was made from (same key,
ETag and size, checked with a HEAD by each reader that does not already know them), and a
copy nobody takes again is removed: at most AIRLOCK_S3_TRANSFER.spool_keep idle copies stay, none past
AIRLOCK_S3_TRANSFER.spool_idle_seconds.
A derive job that lands on another worker downloads it itself, as before.

A worker killed with SIGKILL (or by the OOM killer) never runs its atexit: its
`airlock-spool-*` directory, a whole video perhaps, would stay in TMPDIR for good. Each
directory holds a `.owner` file its process keeps an exclusive flock on; the kernel drops
the lock when the process dies, so at worker start (worker_boot.SpoolLeftovers) every
directory whose lock can be taken belongs to no living process and is removed.

The keys read here are write-once (a server-only snapshot, an upload the server sealed,
or a local upload), so the copy is the bytes the scan judged; the HEAD is the check
that it still is. A reader that knows the object already (`known`: intake's own look, or
the row's size of a snapshot key, which only the server writes and never rewrites) makes
no HEAD; a snapshot gone from storage is then found by the download, or not at all when
this process still holds the copy the scan read.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attachments.storage.base import ObjectInfo, StorageError

from .errors import TransientError

CHUNK = 1 << 20  # download and read size: one MiB per call, not the whole object
PREFIX = "airlock-spool-"
OWNER = ".owner"
# A directory without an owner file was made by a worker of an older release, or is being
# made right now (between mkdtemp and the lock): removed only once it is this old.
UNOWNED_GRACE_SECONDS = 24 * 3600

log = logging.getLogger("airlock.worker")


@dataclass
class _Copy:
    key: str
    etag: str
    size: int
    path: Path
    users: int = 0
    idle_since: float = 0.0


class Spool:
    """The process's local copies, by storage key."""

    def __init__(self, *, keep: int, idle_seconds: float) -> None:
        self.keep, self.idle_seconds = keep, idle_seconds
        self._lock = threading.Lock()
        self._copies: dict[str, _Copy] = {}
        self._dir: tuple[int, Path | None] = (0, None)  # (pid that made it, dir)
        self._owner: Any = None  # the open, locked owner file of that dir
        self.downloads = 0  # objects fetched in full (tests and benchmarks read it)

    def _directory(self) -> Path:
        pid, path = self._dir
        if pid != os.getpid() or path is None:  # a forked child never shares its parent's files
            self._copies = {}
            path = Path(tempfile.mkdtemp(prefix=PREFIX))  # 0700: this process's only
            owner = open(path / OWNER, "wb")  # noqa: SIM115 - held open for the process's life
            fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
            atexit.register(shutil.rmtree, path, True)
            self._dir = (os.getpid(), path)
            self._owner = owner
        return path

    @contextmanager
    def held(
        self, gateway: Any, key: str, *, limit: int, keep: bool, known: ObjectInfo | None = None
    ) -> Iterator[Path]:
        """A local file with the bytes of `key`; kept for the next reader if `keep` and no error.

        `known`: the object's size (and ETag) as the caller already knows them, so no HEAD
        asks storage again. Only for an object that cannot have changed since: one the caller
        just looked at, or a key written once and never again (a snapshot). Without an ETag it
        vouches for any copy of the key with that size.
        """
        local = gateway.local_path(key)
        if local is not None:
            yield local  # storage's own file: nothing to copy
            return
        info = known if known is not None else gateway.head(key)
        if info is None:
            raise StorageError(f"object {key} is missing")
        if info.size > limit:
            raise TransientError("the object changed size during processing")
        copy = self._take(key, info.etag, info.size)
        if copy is None:
            copy = self._download(gateway, key, info.etag, info.size)
        failed = True
        try:
            yield copy.path
            failed = False
        finally:
            self._give_back(copy, keep=keep and not failed)

    def _take(self, key: str, etag: str, size: int) -> _Copy | None:
        with self._lock:
            self._directory()
            self._evict()
            copy = self._copies.get(key)
            if copy is None:
                return None
            # Another object under the key: never read it. No ETag to compare: the reader
            # vouches for the key (`known`), so the size is the check.
            if copy.size != size or (etag and copy.etag != etag):
                if copy.users == 0:
                    self._drop(copy)
                return None
            copy.users += 1
            return copy

    def _download(self, gateway: Any, key: str, etag: str, size: int) -> _Copy:
        with self._lock:
            directory = self._directory()
        fd, name = tempfile.mkstemp(dir=directory, prefix="object-")
        written = 0
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in gateway.iter_chunks(key, chunk_size=CHUNK):
                    written += len(chunk)
                    if written > size:
                        raise TransientError("the object changed size during processing")
                    out.write(chunk)
            if written != size:
                raise TransientError("the object changed size during processing")
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        copy = _Copy(key=key, etag=etag, size=size, path=Path(name), users=1)
        with self._lock:
            self.downloads += 1
            old = self._copies.get(key)
            if old is None or old.users == 0:
                if old is not None:
                    self._drop(old)
                self._copies[key] = copy
        return copy  # when another reader's copy is in use, this one is dropped on give-back

    def _give_back(self, copy: _Copy, *, keep: bool) -> None:
        with self._lock:
            copy.users -= 1
            copy.idle_since = time.monotonic()
            mine = self._copies.get(copy.key) is copy
            if copy.users == 0 and (not keep or not mine):
                self._drop(copy)
            self._evict()

    def _evict(self) -> None:
        now = time.monotonic()
        idle = sorted((c for c in self._copies.values() if c.users == 0), key=lambda c: c.idle_since)
        for n, copy in enumerate(idle):
            if n < len(idle) - self.keep or now - copy.idle_since > self.idle_seconds:
                self._drop(copy)

    def _drop(self, copy: _Copy) -> None:
        if self._copies.get(copy.key) is copy:
            del self._copies[copy.key]
        copy.path.unlink(missing_ok=True)

    def clear(self) -> None:
        with self._lock:
            for copy in list(self._copies.values()):
                if copy.users == 0:
                    self._drop(copy)


def remove_leftovers(root: Path | None = None, *, now: float | None = None) -> list[Path]:
    """Remove the spool directories of processes that are gone; return what was removed."""
    root = Path(tempfile.gettempdir()) if root is None else root
    now = time.time() if now is None else now
    removed = []
    for path in root.glob(f"{PREFIX}*"):
        try:
            if path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
                continue  # not ours to judge
            if not _abandoned(path, now):
                continue
            shutil.rmtree(path)
        except OSError as exc:  # removed meanwhile, or not readable: the next start tries again
            log.warning("could not remove a spool directory left behind", extra={"path": str(path), "error": str(exc)})
            continue
        removed.append(path)
    if removed:
        log.info("removed %d spool directories left by stopped workers", len(removed))
    return removed


def _abandoned(path: Path, now: float) -> bool:
    try:
        fd = os.open(path / OWNER, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return now - path.stat().st_mtime > UNOWNED_GRACE_SECONDS
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a living process holds it
    finally:
        os.close(fd)  # also releases the lock, if taken
    return True


_spool: Spool | None = None
_spool_lock = threading.Lock()


def get_spool() -> Spool:
    global _spool
    if _spool is None:
        from django.conf import settings

        with _spool_lock:
            if _spool is None:
                _spool = Spool(
                    keep=settings.AIRLOCK_S3_TRANSFER.spool_keep,
                    idle_seconds=settings.AIRLOCK_S3_TRANSFER.spool_idle_seconds,
                )
    return _spool


def file_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            yield block
