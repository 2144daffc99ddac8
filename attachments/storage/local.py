"""Local filesystem storage under AIRLOCK_STORAGE_ROOT (the embedded default).

Every directory it makes is 0700 and every object 0600 (attachments.private_files):
uploads and quarantined files are readable by Airlock's own user only.

An object counts as stored only once it would survive a power cut: its bytes
are fsynced before the rename that names it, and its directory (with any
directory made for it) after, so the new name is on disk too. Without the
first, a crash can leave the name pointing at an empty or short file; without
the second, the rename itself can be lost.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from ..private_files import FILE_MODE, private_dir
from .base import ObjectExists, ObjectInfo, StorageError, UploadInstruction, validate_key


class LocalGateway:
    name = "local"
    # Signed PUTs are single-use: each creates its key and never replaces it (create_chunks).
    rewritable_uploads = False

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / validate_key(key)

    def local_path(self, key: str) -> Path | None:
        """The object's own file, for readers that want a path (the sandbox)."""
        path = self._path(key)
        return path if path.is_file() else None

    def head(self, key: str) -> ObjectInfo | None:
        try:
            st = self._path(key).stat()
        except FileNotFoundError:
            return None
        return ObjectInfo(
            key=key,
            size=st.st_size,
            etag=f"{st.st_mtime_ns:x}-{st.st_size:x}",
            last_modified=datetime.fromtimestamp(st.st_mtime, tz=UTC),
        )

    def read_range(self, key: str, start: int, length: int) -> bytes:
        try:
            with open(self._path(key), "rb") as fh:
                fh.seek(start)
                return fh.read(length)
        except FileNotFoundError as exc:
            raise StorageError(f"object {key} is missing") from exc

    def iter_chunks(
        self, key: str, *, chunk_size: int = 65536, start: int = 0, end: int | None = None
    ) -> Iterator[bytes]:
        try:
            fh = open(self._path(key), "rb")
        except FileNotFoundError as exc:
            raise StorageError(f"object {key} is missing") from exc
        with fh:
            fh.seek(start)
            remaining = None if end is None else end - start + 1
            while remaining is None or remaining > 0:
                want = chunk_size if remaining is None else min(chunk_size, remaining)
                chunk = fh.read(want)
                if not chunk:
                    return
                if remaining is not None:
                    remaining -= len(chunk)
                yield chunk

    def prefetch(self, key: str, length: int) -> None:
        """A hint that the object's first `length` bytes are read soon: the kernel starts reading them now.

        posix_fadvise(WILLNEED) queues the reads and returns; the pages land in the page cache
        (no memory of this process), so a reader busy meanwhile (the ref archive, sending the
        member before) finds them there instead of waiting on the disk for each file in turn.
        """
        if not hasattr(os, "posix_fadvise"):  # not Linux: reads just wait on the disk
            return
        try:
            fd = os.open(self._path(key), os.O_RDONLY)
        except (OSError, StorageError):
            return  # a hint only: the read itself reports a missing object
        try:
            os.posix_fadvise(fd, 0, length, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _parent_dir(self, final: Path) -> list[Path]:
        """Make the object's directory; the directories whose entries must be synced once it is named."""
        made = []
        current = final.parent
        while current != self.root and not current.exists():
            made.append(current)
            current = current.parent
        private_dir(final.parent)
        # The object's own directory, then each parent that gained a new directory.
        return [final.parent, *(directory.parent for directory in made)]

    def write_chunks(self, key: str, chunks: Iterable[bytes], *, content_type: str = "") -> int:
        """Write to a temp file, fsync it, rename it into place, fsync the directory.

        Readers never see half a file; if the iterable raises (e.g. the body grew
        past its limit) nothing is kept.
        """
        return self._write(key, chunks, exclusive=False)

    def create_chunks(self, key: str, chunks: Iterable[bytes], *, content_type: str = "") -> int:
        """write_chunks, but the temp file is linked into place, which fails if the key exists.

        ObjectExists then, and nothing is kept: of two racing writers the first to
        finish keeps the key (one atomic link), the other writes nothing.
        """
        return self._write(key, chunks, exclusive=True)

    def _write(self, key: str, chunks: Iterable[bytes], *, exclusive: bool) -> int:
        final = self._path(key)
        directories = self._parent_dir(final)
        fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".upload-")  # 0600
        written = 0
        try:
            with os.fdopen(fd, "wb") as fh:
                for chunk in chunks:
                    fh.write(chunk)
                    written += len(chunk)
                fh.flush()
                os.fsync(fh.fileno())
            if exclusive:
                try:
                    os.link(tmp, final)
                except FileExistsError:
                    raise ObjectExists(f"object {key} exists") from None
                Path(tmp).unlink()
            else:
                os.replace(tmp, final)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _sync_directories(directories)
        return written

    def scratch_dir(self) -> Path:
        """Temporary files next to the objects (outside every key prefix), so moves are renames."""
        return private_dir(self.root / ".scratch")

    def move_file_in(self, key: str, path: Path, *, content_type: str = "") -> int:
        """Store a file the caller no longer needs: a rename when on the same filesystem."""
        final = self._path(key)
        directories = self._parent_dir(final)
        size = Path(path).stat().st_size
        try:
            os.chmod(path, FILE_MODE)  # a rename keeps the mode its writer (e.g. the sandbox) gave it
            _sync_file(Path(path))  # its writer (the sandbox, a tus PATCH) did not sync it
            os.replace(path, final)
        except OSError:  # another filesystem: copy
            return self.write_file(key, path, content_type=content_type)
        _sync_directories(directories)
        return size

    def write_file(self, key: str, path: Path, *, content_type: str = "") -> int:
        with open(path, "rb") as fh:
            return self.write_chunks(key, iter(lambda: fh.read(65536), b""))

    def download_to(self, key: str, path: Path, *, max_bytes: int) -> int:
        written = 0
        with open(path, "wb") as out:
            for chunk in self.iter_chunks(key):
                written += len(chunk)
                if written > max_bytes:
                    raise StorageError(f"object {key} grew past {max_bytes} bytes")
                out.write(chunk)
        return written

    def copy(self, src: str, dst: str) -> str:
        # Through write_chunks: a private temp file renamed into place (copyfile
        # would create the target with the umask's 0644).
        self.write_chunks(dst, self.iter_chunks(src, chunk_size=1 << 20))
        return ""  # no ETag comes back from a local write

    def delete(self, key: str) -> bool:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            return False
        return True

    def delete_unchecked(self, key: str) -> None:
        self.delete(key)

    def list_prefix(self, prefix: str) -> Iterator[ObjectInfo]:
        base = self.root / prefix if prefix else self.root
        if not base.exists():
            return
        for dirpath, _dirnames, filenames in os.walk(base):
            for name in filenames:
                if name.startswith(".upload-"):
                    continue
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                try:
                    st = full.stat()
                except FileNotFoundError:
                    continue
                yield ObjectInfo(key=key, size=st.st_size, last_modified=datetime.fromtimestamp(st.st_mtime, tz=UTC))

    def presign_upload(
        self, key: str, *, content_type: str, max_bytes: int, expires_in: int, sha256: str = ""
    ) -> UploadInstruction | None:
        return None  # the service hands out its own signed PUT URL (and checks sha256 as it stores)

    def presign_download(self, key: str, *, content_type: str, disposition: str, expires_in: int) -> str | None:
        return None  # served by the gated view itself

    def ping(self) -> None:
        private_dir(self.root)
        if not os.access(self.root, os.W_OK):
            raise StorageError(f"{self.root} is not writable")


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_directories(directories: Iterable[Path]) -> None:
    """fsync each directory, so the names written in it (a rename, a new directory) survive a crash."""
    for directory in directories:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
