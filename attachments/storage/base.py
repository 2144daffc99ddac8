from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class StorageError(Exception):
    """Storage did not answer as expected: transient for the pipeline."""


class ObjectExists(StorageError):
    """A create-only write found an object at its key already: nothing was written."""


class PartsInvalid(Exception):
    """A client's multipart part list does not match what storage holds: the client's error."""


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str = ""
    last_modified: datetime | None = None


@dataclass(frozen=True)
class MultipartUploadInfo:
    """An unfinished multipart upload as storage lists it."""

    key: str
    upload_id: str
    initiated: datetime | None = None


@dataclass(frozen=True)
class UploadPart:
    part_number: int
    url: str
    size: int


@dataclass(frozen=True)
class UploadInstruction:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)
    # Multipart (S3, over AIRLOCK_S3_MULTIPART.threshold_bytes): one presigned PUT per
    # part, then POST /uploads/{id}/complete with the parts' ETags. The upload id
    # stays on the server (Attachment.multipart_upload_id), never in a response.
    parts: tuple[UploadPart, ...] = ()
    part_size: int | None = None
    upload_id: str = ""


def validate_key(key: str) -> str:
    """Keys are minted by us; refuse anything that could escape a prefix."""
    parts = key.split("/")
    if not key or len(key) > 512 or any(not _SEGMENT.match(p) or p in {".", ".."} for p in parts):
        raise StorageError(f"refusing storage key {key[:100]!r}")
    return key


class StorageGateway(Protocol):
    name: str
    # True when a client can write the upload key again after it was processed.
    rewritable_uploads: bool

    def head(self, key: str) -> ObjectInfo | None: ...

    def local_path(self, key: str) -> Path | None: ...

    def scratch_dir(self) -> Path | None: ...

    def move_file_in(self, key: str, path: Path, *, content_type: str = "") -> int: ...

    def read_range(self, key: str, start: int, length: int) -> bytes: ...

    def iter_chunks(
        self, key: str, *, chunk_size: int = 65536, start: int = 0, end: int | None = None
    ) -> Iterator[bytes]: ...

    def prefetch(self, key: str, length: int) -> None: ...

    def write_chunks(self, key: str, chunks: Iterable[bytes], *, content_type: str = "") -> int: ...

    def write_file(self, key: str, path: Path, *, content_type: str = "") -> int: ...

    def download_to(self, key: str, path: Path, *, max_bytes: int) -> int: ...

    def copy(self, src: str, dst: str) -> str:
        """Copy one object to a new key; return the copy's ETag as storage answered it ("" when it did not)."""
        ...

    def delete(self, key: str) -> bool: ...

    def delete_unchecked(self, key: str) -> None: ...

    def list_prefix(self, prefix: str) -> Iterator[ObjectInfo]: ...

    def presign_upload(
        self, key: str, *, content_type: str, max_bytes: int, expires_in: int, sha256: str = ""
    ) -> UploadInstruction | None: ...

    def presign_download(self, key: str, *, content_type: str, disposition: str, expires_in: int) -> str | None: ...

    def ping(self) -> None: ...


@runtime_checkable
class CreateOnlyGateway(Protocol):
    """Gateways that can store an object only where none is (local): the key's first writer keeps it."""

    def create_chunks(self, key: str, chunks: Iterable[bytes], *, content_type: str = "") -> int:
        """write_chunks, but ObjectExists (nothing written) when the key holds an object already."""
        ...


@runtime_checkable
class MultipartGateway(Protocol):
    """Gateways whose presigned uploads may be multipart (S3)."""

    def complete_multipart(self, key: str, *, upload_id: str, parts: list[tuple[int, str]]) -> bool: ...

    def abort_multipart(self, key: str, *, upload_id: str) -> bool: ...

    def list_multipart_uploads(self, prefix: str) -> Iterator[MultipartUploadInfo]: ...

    def list_parts(self, key: str, *, upload_id: str) -> dict[int, tuple[str, int]] | None: ...

    def part_sizes(self, total: int) -> dict[int, int]: ...

    def presign_parts(
        self, key: str, *, upload_id: str, sizes: dict[int, int], expires_in: int
    ) -> tuple[UploadPart, ...]: ...


def move(gateway: StorageGateway, src: str, dst: str) -> None:
    """Copy then delete: never lose the object if the second step fails."""
    gateway.copy(src, dst)
    gateway.delete(src)
