"""Where a tus upload's bytes wait until the last one lands (storage IO only, no rows).

Local: one staging file per upload under `<root>/.tus/`, a directory no key can
name (every key segment starts with a letter or digit), so nothing half-uploaded
is ever servable; when complete it is renamed onto the minted key. Whoever
changes a staging file (writes, truncates, promotes, removes it) first holds its
fence, an exclusive flock the kernel drops when the holder's process dies: a
writer whose body stalls keeps it, so nobody takes its place while it can still
write, and the write handle is closed before the rename, so no writer can reach
the stored object.

S3: a multipart upload on the minted key. S3 refuses parts under 5 MiB except
the last, so the bytes after the last full part (the tail) are kept by the
caller (in the database) and sent with the next PATCH; on the last byte the
tail becomes the last part and the upload is completed. An upload smaller than
one part never needs a multipart upload: it is written as one object.
"""

from __future__ import annotations

import fcntl
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError

from ..private_files import FILE_MODE, private_dir
from .base import StorageError, StorageGateway, validate_key

MIB = 1024 * 1024
S3_MIN_PART = 5 * MIB
S3_MAX_PARTS = 10_000


def s3_part_size(length: int) -> int:
    """The size of every part but the last: S3's minimum, or more when 10,000 parts would not hold it."""
    return max(S3_MIN_PART, math.ceil(length / S3_MAX_PARTS))


class StagingBusy(Exception):
    """Another live request holds this upload's staging file."""


class StagingFence:
    """An exclusive flock on one staging file; `fd` is a read-only descriptor (nothing writes through it)."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    def holds_file(self) -> bool:
        return self.fd is not None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # drops the flock
            self.fd = None


class LocalStaging:
    """Append-only staging files beside the local gateway's objects (same filesystem: completion is a rename)."""

    def __init__(self, gateway: StorageGateway) -> None:
        self.gateway = gateway
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

    def open_at(self, fence: StagingFence, offset: int) -> BinaryIO:
        """The fenced staging file opened for writing at `offset`; whatever lies past it is cut off.

        Bytes past the recorded offset were never acknowledged (a server killed mid-PATCH):
        the client sends them again. The caller closes it before the file is promoted.
        """
        if fence.fd is None:
            raise StorageError(f"{fence.path.name}: no staging file is fenced")
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

    def promote(self, fence: StagingFence, key: str, *, content_type: str = "") -> int:
        """Make the fenced staging file the object at `key` (a rename); the size stored.

        The fence's descriptor is read-only and every write handle is closed by now:
        after the rename nothing can write to the object.
        """
        if fence.fd is None:
            raise StorageError(f"{fence.path.name}: no staging file is fenced")
        return self.gateway.move_file_in(key, fence.path, content_type=content_type)

    def discard(self, fence: StagingFence) -> bool:
        if fence.fd is None:
            return False
        try:
            fence.path.unlink()
        except FileNotFoundError:
            return False
        return True


class S3Staging:
    """The multipart upload behind an S3 tus upload."""

    def __init__(self, gateway: StorageGateway) -> None:
        self.gateway = gateway

    @property
    def _client(self) -> Any:
        return self.gateway.client  # type: ignore[attr-defined]

    @property
    def _bucket(self) -> str:
        return self.gateway.bucket  # type: ignore[attr-defined]

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
            lambda: self._client.create_multipart_upload(
                Bucket=self._bucket, Key=key, ContentType=content_type or "application/octet-stream"
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
            lambda: self._client.upload_part(
                Bucket=self._bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body, ContentLength=size
            ),
        )
        return str(sent["ETag"])

    def complete(self, key: str, *, upload_id: str, parts: list[list]) -> bool:
        """Assemble the parts; False when the upload no longer exists (completed before a crash, or aborted)."""
        validate_key(key)
        listed = [{"PartNumber": int(n), "ETag": str(etag)} for n, etag, _size in sorted(parts)]
        try:
            self._client.complete_multipart_upload(
                Bucket=self._bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": listed}
            )
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) == "NoSuchUpload":
                return False
            raise StorageError(f"complete multipart {key}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"complete multipart {key}: {exc}") from exc
        return True

    def write_whole(self, key: str, chunks: Iterable[bytes], *, content_type: str) -> int:
        return self.gateway.write_chunks(key, chunks, content_type=content_type)

    def abort(self, key: str, *, upload_id: str) -> bool:
        """Drop the parts; False when the upload is already gone."""
        from .base import MultipartGateway

        if isinstance(self.gateway, MultipartGateway):
            return self.gateway.abort_multipart(key, upload_id=upload_id)
        return False


def staging_for(gateway: StorageGateway) -> LocalStaging | S3Staging:
    if gateway.name == "s3":
        return S3Staging(gateway)
    if gateway.name == "local":
        return LocalStaging(gateway)
    raise StorageError(f"storage backend {gateway.name} has no tus staging")
