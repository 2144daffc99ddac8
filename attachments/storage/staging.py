"""Where a resumable upload's bytes wait until the last one lands: one interface, a local and an S3 staging.

The service holds the transfer's row and its claim; a staging holds the bytes.
It reads the transfer's recorded state (offset, parts, tail, upload id) and
reports progress through the service's `Journal`, so rows stay in services and
services never ask which backend they run on.

Local: one staging file per upload under `<root>/.tus/`, a directory no key can
name (every key segment starts with a letter or digit), so nothing half-uploaded
is ever servable; when complete it is renamed onto the minted key. Whoever
changes a staging file (writes, truncates, promotes, removes it) first holds its
fence, an exclusive flock the kernel drops when the holder's process dies: a
writer whose body stalls keeps it, so nobody takes its place while it can still
write, and the write handle is closed before the rename, so no writer can reach
the stored object.

S3: a multipart upload on the minted key, which S3 closes on completion. S3
refuses parts under 5 MiB except the last, so the bytes after the last full part
(the tail) are recorded with the transfer (in the database) and sent with the
next PATCH; on the last byte the tail becomes the last part and the upload is
completed, only ever from what was recorded (the same bytes, whoever completes,
however late). An upload smaller than one part is written as one object. There
is nothing to fence: the claim, checked before each part and each record, is
the only guard.
"""

from __future__ import annotations

import fcntl
import io
import math
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from ..private_files import FILE_MODE, private_dir
from .base import PartsInvalid, StorageError, StorageGateway, validate_key

MIB = 1024 * 1024
S3_MIN_PART = 5 * MIB
S3_MAX_PARTS = 10_000


def s3_part_size(length: int) -> int:
    """The size of every part but the last: S3's minimum, or more when 10,000 parts would not hold it."""
    return max(S3_MIN_PART, math.ceil(length / S3_MAX_PARTS))


class StagingBusy(Exception):
    """Another live request holds this upload's staged bytes (its fence, or its claim)."""


class Transfer(Protocol):
    """What the service recorded of one transfer (its row)."""

    length: int
    offset: int
    parts: Any  # S3: [[number, etag, size], …] of the parts sent
    tail: Any  # S3: the bytes after the last part
    s3_upload_id: str


class Journal(Protocol):
    """The service's side of an append: it records progress on the transfer's row under the writer's claim."""

    def check(self) -> None:
        """Raise when the writer lost its claim (before anything more is written)."""

    def record(self, offset: int, **fields: Any) -> bool:
        """Save the offset (and `parts`, `tail`) on the row and the transfer; False when the claim was lost."""

    def record_upload_id(self, upload_id: str) -> bool:
        """Save a new multipart upload's id at once (an expiry must be able to abort it); False when lost."""


class Checksum(Protocol):
    """A PATCH's Upload-Checksum: a checksummed chunk is kept whole or not at all."""

    def update(self, chunk: bytes) -> None: ...

    def verify(self) -> None:
        """Raise when the bytes seen do not match."""


@dataclass(frozen=True)
class Patch:
    """One request's bytes for a transfer, with its checksum and the service's record of progress."""

    body: Iterable[bytes]
    checksum: Checksum | None
    journal: Journal


class StagingFence:
    """An exclusive flock on one staging file; `fd` is a read-only descriptor (nothing writes through it).

    A fence with no descriptor holds nothing: no staging file yet, or a backend with nothing to fence.
    """

    def __init__(self, path: Path | None = None, fd: int | None = None) -> None:
        self.path = path
        self.fd = fd

    def holds_file(self) -> bool:
        return self.fd is not None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # drops the flock
            self.fd = None


class Staging(ABC):
    """The staged bytes of resumable uploads; `name` is the upload's id, `key` the object it becomes."""

    def __init__(self, gateway: StorageGateway) -> None:
        self.gateway = gateway

    def fence(self, name: str, *, create: bool) -> StagingFence:
        """Hold the right to change `name`'s staged bytes, or StagingBusy while a live writer has it."""
        return StagingFence()

    def drop_unused(self, fence: StagingFence) -> None:
        """Remove what `fence(create=True)` made for an upload that ended meanwhile (nothing was written)."""

    def kept(self, name: str, transfer: Transfer) -> int:
        """How many of the recorded bytes are really staged (fewer when a crash lost acknowledged ones)."""
        return transfer.offset

    @abstractmethod
    def append(self, transfer: Transfer, fence: StagingFence, patch: Patch, *, key: str, content_type: str) -> None:
        """Stage the PATCH's body after the recorded offset, recording progress; what arrived before a failure
        stays (unless checksummed). StagingBusy when the claim was lost."""

    @abstractmethod
    def finish(self, transfer: Transfer, fence: StagingFence, *, key: str, content_type: str) -> int:
        """Make the recorded bytes the object at `key`; its size. Idempotent: a finish whose server died
        before recording it is recognised by the object already there."""

    @abstractmethod
    def remove(self, transfer: Transfer, fence: StagingFence, *, key: str) -> None:
        """Delete what a transfer left staged."""

    def _already_there(self, key: str, length: int, *, gone: str) -> int:
        info = self.gateway.head(key)
        if info is None or info.size != length:
            raise StorageError(f"{gone} of {key} is gone")
        return info.size


class LocalStaging(Staging):
    """Append-only staging files beside the local gateway's objects (same filesystem: completion is a rename)."""

    def __init__(self, gateway: StorageGateway) -> None:
        super().__init__(gateway)
        self.root = Path(gateway.root)  # type: ignore[attr-defined]

    def _path(self, name: str) -> Path:
        validate_key(name)  # one plain segment: an attachment id
        return self.root / ".tus" / name

    def size(self, name: str) -> int:
        try:
            return self._path(name).stat().st_size
        except FileNotFoundError:
            return 0

    def fence(self, name: str, *, create: bool) -> StagingFence:
        """Hold the staging file of `name` exclusively, or StagingBusy; without `create`, a missing file is
        fenced as nothing (there is nothing to protect until a writer makes one).

        The lock is taken on the file the path names *after* locking: a file renamed
        onto its key (or removed) while we waited for it is not the staging file any more.
        """
        path = self._path(name)
        if create:
            private_dir(path.parent)
        for _ in range(8):
            try:
                fd = os.open(path, os.O_RDONLY | (os.O_CREAT if create else 0), FILE_MODE)
            except FileNotFoundError:
                return StagingFence(path, None)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise StagingBusy(name) from None
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            if current is not None and os.path.samestat(os.fstat(fd), current):
                return StagingFence(path, fd)
            os.close(fd)  # promoted or removed meanwhile: fence what the path names now
        raise StagingBusy(name)

    def drop_unused(self, fence: StagingFence) -> None:
        if fence.path is not None and self.size(fence.path.name) == 0:
            self.discard(fence)

    def kept(self, name: str, transfer: Transfer) -> int:
        return min(self.size(name), transfer.offset)

    def open_at(self, fence: StagingFence, offset: int) -> BinaryIO:
        """The fenced staging file opened for writing at `offset`; whatever lies past it is cut off.

        Bytes past the recorded offset were never acknowledged (a server killed mid-PATCH):
        the client sends them again. The caller closes it before the file is promoted.
        """
        if fence.fd is None or fence.path is None:
            raise StorageError("no staging file is fenced")
        fd = os.open(fence.path, os.O_WRONLY)
        fh = os.fdopen(fd, "r+b")
        try:
            if not os.path.samestat(os.fstat(fd), os.fstat(fence.fd)):
                raise StorageError(f"staging file of {fence.path.name} changed under its fence")
            actual = os.fstat(fd).st_size
            if actual < offset:
                raise StorageError(
                    f"staging file of {fence.path.name} holds {actual} bytes, {offset} were acknowledged"
                )
            fh.truncate(offset)
            fh.seek(offset)
        except BaseException:
            fh.close()
            raise
        return fh

    def append(self, transfer: Transfer, fence: StagingFence, patch: Patch, *, key: str, content_type: str) -> None:
        start, checksum, journal = transfer.offset, patch.checksum, patch.journal
        written = 0
        fh = self.open_at(fence, start)
        try:
            try:
                for chunk in patch.body:
                    fh.write(chunk)
                    written += len(chunk)
                    if checksum is not None:
                        checksum.update(chunk)
                fh.flush()
                os.fsync(fh.fileno())
            except BaseException:
                if checksum is not None:  # a checksummed chunk is all or nothing
                    written = 0
                fh.truncate(start + written)
                fh.flush()
                journal.record(start + written)
                raise
            if checksum is not None:
                try:
                    checksum.verify()
                except BaseException:
                    fh.truncate(start)
                    raise
        finally:
            fh.close()  # before any promotion: no write handle outlives this function
        if not journal.record(start + written):
            raise StagingBusy(key)

    def promote(self, fence: StagingFence, key: str, *, content_type: str = "") -> int:
        """Make the fenced staging file the object at `key` (a rename); the size stored.

        The fence's descriptor is read-only and every write handle is closed by now:
        after the rename nothing can write to the object.
        """
        if fence.fd is None or fence.path is None:
            raise StorageError("no staging file is fenced")
        return self.gateway.move_file_in(key, fence.path, content_type=content_type)

    def finish(self, transfer: Transfer, fence: StagingFence, *, key: str, content_type: str) -> int:
        if fence.holds_file():
            return self.promote(fence, key, content_type=content_type)
        # No staging file: renamed onto the key by a completion whose server died before recording it.
        return self._already_there(key, transfer.length, gone="the staging file")

    def discard(self, fence: StagingFence) -> bool:
        if fence.fd is None or fence.path is None:
            return False
        try:
            fence.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def remove(self, transfer: Transfer, fence: StagingFence, *, key: str) -> None:
        self.discard(fence)


def _spooled(body: Iterable[bytes], checksum: Checksum) -> Generator[bytes, None, None]:
    """Receive the whole checksummed chunk before any of it goes to S3 (parts cannot be taken back)."""
    with tempfile.TemporaryFile() as spool:
        for chunk in body:
            spool.write(chunk)
            checksum.update(chunk)
        yield b""  # the checksum is final now: the caller verifies it before reading on
        spool.seek(0)
        yield from iter(lambda: spool.read(1 << 20), b"")


class S3Staging(Staging):
    """The multipart upload behind an S3 resumable upload."""

    gateway: Any  # the S3 gateway: its client, bucket and multipart calls

    def _call(self, action: str, key: str, call):
        try:
            return call()
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            raise StorageError(f"{action} {key}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"{action} {key}: {exc}") from exc

    def create(self, key: str, *, content_type: str) -> str:
        validate_key(key)
        created = self._call(
            "create multipart",
            key,
            lambda: self.gateway.client.create_multipart_upload(
                Bucket=self.gateway.bucket, Key=key, ContentType=content_type or "application/octet-stream"
            ),
        )
        return str(created["UploadId"])

    def upload_part(self, key: str, *, upload_id: str, number: int, body: IO[bytes], size: int) -> str:
        """Send one part (the same number again replaces it: a retry after a crash is harmless); its ETag."""
        validate_key(key)
        body.seek(0)
        sent = self._call(
            "upload part",
            key,
            lambda: self.gateway.client.upload_part(
                Bucket=self.gateway.bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
                ContentLength=size,
            ),
        )
        return str(sent["ETag"])

    def append(self, transfer: Transfer, fence: StagingFence, patch: Patch, *, key: str, content_type: str) -> None:
        checksum, journal = patch.checksum, patch.journal
        part_size = s3_part_size(transfer.length)
        parts: list[list] = list(transfer.parts)
        source: Iterator[bytes] = iter(patch.body)
        if checksum is not None:
            spooled = _spooled(patch.body, checksum)
            next(spooled)  # the whole body is in: verify before anything is sent
            try:
                checksum.verify()
            except BaseException:
                spooled.close()
                raise
            source = spooled
        buffer = tempfile.SpooledTemporaryFile(max_size=part_size + 1)
        buffer.write(bytes(transfer.tail))

        def flush() -> None:
            nonlocal buffer
            journal.check()  # a writer that lost its claim must not replace the new holder's parts
            if not transfer.s3_upload_id:
                upload_id = self.create(key, content_type=content_type)
                if not journal.record_upload_id(upload_id):
                    self.gateway.abort_multipart(key, upload_id=upload_id)
                    raise StagingBusy(key)
            number = len(parts) + 1
            size = buffer.tell()
            etag = self.upload_part(key, upload_id=transfer.s3_upload_id, number=number, body=buffer, size=size)
            parts.append([number, etag, size])
            buffer.close()
            buffer = tempfile.SpooledTemporaryFile(max_size=part_size + 1)
            if not journal.record(sum(p[2] for p in parts), parts=parts, tail=b""):
                raise StagingBusy(key)

        def save_tail() -> None:
            buffer.seek(0)
            tail = buffer.read()
            if not journal.record(sum(p[2] for p in parts) + len(tail), tail=tail):
                raise StagingBusy(key)

        try:
            try:
                for chunk in source:
                    view = memoryview(chunk)
                    while view:
                        room = part_size - buffer.tell()
                        buffer.write(view[:room])
                        view = view[room:]
                        if buffer.tell() >= part_size:
                            flush()
            except BaseException:
                save_tail()  # what arrived stays (clients resume from HEAD's offset)
                raise
            save_tail()
        finally:
            buffer.close()

    def finish(self, transfer: Transfer, fence: StagingFence, *, key: str, content_type: str) -> int:
        length = transfer.length
        assembled = self.gateway.head(key)
        if assembled is not None and assembled.size == length:
            return length  # assembled by an earlier attempt (from the same recorded bytes) that was not recorded
        tail = bytes(transfer.tail)
        upload_id = transfer.s3_upload_id
        if not upload_id:  # smaller than one part: a plain object
            return self.gateway.write_chunks(key, [tail], content_type=content_type)
        parts = list(transfer.parts)
        if tail or not parts:
            etag = self.upload_part(
                key, upload_id=upload_id, number=len(parts) + 1, body=io.BytesIO(tail), size=len(tail)
            )
            parts.append([len(parts) + 1, etag, len(tail)])
        try:
            completed = self.gateway.complete_multipart(
                key, upload_id=upload_id, parts=[(int(n), str(etag)) for n, etag, _size in parts]
            )
        except PartsInvalid as exc:  # the parts are the server's own record: not a client's error
            raise StorageError(f"complete multipart {key}: {exc}") from exc
        if not completed:
            # Completed by an earlier attempt whose server died before recording it, or aborted.
            return self._already_there(key, length, gone="multipart upload")
        return length

    def remove(self, transfer: Transfer, fence: StagingFence, *, key: str) -> None:
        if transfer.s3_upload_id:
            self.gateway.abort_multipart(key, upload_id=transfer.s3_upload_id)


def staging_for(gateway: StorageGateway) -> Staging:
    if gateway.name == "s3":
        return S3Staging(gateway)
    if gateway.name == "local":
        return LocalStaging(gateway)
    raise StorageError(f"storage backend {gateway.name} has no resumable-upload staging")
