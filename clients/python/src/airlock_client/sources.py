"""What an upload reads from: a path or a binary file object, with its size, name and SHA-256."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

READ_SIZE = 1 << 20
SPOOL_IN_MEMORY = 8 << 20  # an unseekable stream is kept in memory up to this, then on disk


class Source:
    """A seekable view of the bytes to upload, from the position the caller's file was at."""

    def __init__(
        self, fileobj: BinaryIO, *, start: int, size: int, filename: str, owned: bool, sha256: str | None = None
    ) -> None:
        self._file = fileobj
        self._start = start
        self.size = size
        self.filename = filename
        self._owned = owned
        self._sha256 = sha256

    @classmethod
    def open(cls, source: str | os.PathLike[str] | BinaryIO, filename: str | None = None) -> Source:
        if isinstance(source, (str, os.PathLike)):
            path = Path(source)
            fileobj = path.open("rb")
            return cls(fileobj, start=0, size=path.stat().st_size, filename=filename or path.name, owned=True)
        name = filename or os.path.basename(str(getattr(source, "name", "") or "")) or "file"
        if _seekable(source):
            start = source.tell()
            size = source.seek(0, io.SEEK_END) - start
            source.seek(start)
            return cls(source, start=start, size=size, filename=name, owned=False)
        return cls._spooled(source, name)

    @classmethod
    def _spooled(cls, stream: BinaryIO, filename: str) -> Source:
        """An unseekable stream (a pipe, a socket): copied aside once, hashed while it is read."""
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        digest = hashlib.sha256()
        size = 0
        while chunk := stream.read(READ_SIZE):
            digest.update(chunk)
            spool.write(chunk)
            size += len(chunk)
        spool.seek(0)
        return cls(
            spool,  # type: ignore[arg-type]
            start=0,
            size=size,
            filename=filename,
            owned=True,
            sha256=digest.hexdigest(),
        )

    def sha256(self) -> str:
        """The hex SHA-256 of the bytes (one pass over them, the first time it is asked)."""
        if self._sha256 is None:
            digest = hashlib.sha256()
            for chunk in self.iter_range(0, self.size):
                digest.update(chunk)
            self._sha256 = digest.hexdigest()
        return self._sha256

    def read_at(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes from `offset` (fewer only at the end of the upload)."""
        length = max(0, min(length, self.size - offset))
        self._file.seek(self._start + offset)
        parts, missing = [], length
        while missing:
            chunk = self._file.read(missing)
            if not chunk:
                raise OSError(f"{self.filename} ended at {offset + length - missing} bytes; {self.size} were expected")
            parts.append(chunk)
            missing -= len(chunk)
        return b"".join(parts)

    def iter_range(self, start: int, end: int, read_size: int = READ_SIZE) -> Iterator[bytes]:
        offset = start
        while offset < end:
            chunk = self.read_at(offset, min(read_size, end - offset))
            offset += len(chunk)
            yield chunk

    def close(self) -> None:
        if self._owned:
            self._file.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _seekable(fileobj: BinaryIO) -> bool:
    try:
        return bool(fileobj.seekable())
    except (AttributeError, OSError, ValueError):
        return False
