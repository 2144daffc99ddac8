"""S3-compatible storage (AWS S3, MinIO, R2, moto) through django-storages and boto3.

django-storages' ``S3Storage`` owns the wiring (bucket, endpoint, region,
credentials from the usual AWS variables, s3v4 signatures, transfer config)
and the whole-object writes; the boto3 client it exposes does what a Django
``Storage`` has no verb for: HEAD, ranged reads, presigned POST/PUT/GET,
server-side copy and multipart uploads.

Every call converts boto errors into ``StorageError`` (transient for the
pipeline); "the object is not there" is an answer (``None``/``False``), not an
error.
"""

from __future__ import annotations

import io
import math
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from boto3.exceptions import Boto3Error
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files import File
from storages.backends.s3 import S3Storage

from ..checksums import sha256_base64
from .base import (
    MultipartUploadInfo,
    ObjectInfo,
    PartsInvalid,
    StorageError,
    UploadInstruction,
    UploadPart,
    validate_key,
)

MIB = 1024 * 1024
MIN_PART_SIZE = 5 * MIB  # S3's minimum for every part but the last
MAX_PARTS = 10_000  # S3's maximum number of parts
MAX_COPY_BYTES = 5 * 1024 * MIB  # S3's largest single CopyObject
_SPOOL_BYTES = 8 * MIB  # writes up to this size stay in memory before the upload
_MISSING_CODES = {"404", "NoSuchKey", "NotFound"}
_TOO_LARGE_TO_COPY = {"InvalidRequest", "EntityTooLarge"}  # a CopyObject source over 5 GiB
_PARTS_INVALID_CODES = {"InvalidPart", "InvalidPartOrder", "EntityTooSmall", "MalformedXML", "InvalidRequest"}
_UPLOAD_METHODS = ("POST", "PUT")
FLAVORS = ("s3", "r2")
_R2_HOST_SUFFIX = ".r2.cloudflarestorage.com"


def s3_flavor(*, flavor: str | None, endpoint_url: str | None) -> str:
    """ "s3" or "r2": as set, else detected from the endpoint (R2's S3 API is <account>.r2.cloudflarestorage.com)."""
    if flavor:
        value = flavor.strip().lower()
        if value not in FLAVORS:
            raise StorageError(f"AIRLOCK_S3_FLAVOR must be s3 or r2, not {flavor!r}")
        return value
    host = (urlsplit(endpoint_url).hostname or "") if endpoint_url else ""
    return "r2" if host.lower().endswith(_R2_HOST_SUFFIX) else "s3"


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _is_missing(exc: ClientError) -> bool:
    return _status(exc) == 404 or _code(exc) in _MISSING_CODES


def part_plan(total: int, part_size: int) -> list[int]:
    """Split `total` bytes into part sizes S3 accepts (≥ 5 MiB but the last, ≤ 10,000 parts)."""
    size = max(part_size, MIN_PART_SIZE, math.ceil(total / MAX_PARTS))
    full, rest = divmod(total, size)
    return [size] * full + ([rest] if rest else [])


class S3Gateway:
    """The storage gateway for an S3-compatible bucket."""

    name = "s3"

    def __init__(
        self,
        *,
        bucket: str,
        endpoint_url: str | None = None,
        region: str | None = None,
        upload_method: str | None = None,
        flavor: str | None = None,
        multipart_threshold: int = 100 * MIB,
        part_size: int = 16 * MIB,
        transfer_chunk_bytes: int = 16 * MIB,
        transfer_threads: int = 4,
    ) -> None:
        if not bucket:
            raise StorageError("AIRLOCK_S3_BUCKET is not set")
        self.flavor = s3_flavor(flavor=flavor, endpoint_url=endpoint_url)
        method = (upload_method or ("PUT" if self.flavor == "r2" else "POST")).upper()
        if method not in _UPLOAD_METHODS:
            raise StorageError(f"AIRLOCK_S3_UPLOAD_METHOD must be POST or PUT, not {upload_method!r}")
        if method == "POST" and self.flavor == "r2":
            raise StorageError("AIRLOCK_S3_UPLOAD_METHOD=POST: R2 has no presigned POST; use PUT (the R2 default)")
        self.bucket = bucket
        self.upload_method = method
        # S3 has no conditional POST: a presigned POST can be replayed over the key
        # until it expires, so intake snapshots the bytes to a server-only key.
        self.rewritable_uploads = method == "POST"
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        # The server's own uploads: explicit part size and concurrency, not boto3's
        # defaults (8 MiB x 10 threads, each part a buffer in memory for a file object).
        chunk = max(transfer_chunk_bytes, MIN_PART_SIZE)
        threads = max(transfer_threads, 1)
        self.transfer_config = TransferConfig(
            multipart_threshold=chunk, multipart_chunksize=chunk, max_concurrency=threads, use_threads=threads > 1
        )
        # For a copy over S3's 5 GiB CopyObject limit (copy() sends one CopyObject below it):
        # 5 GiB part copies, not boto3's default 8 MiB ones.
        self.copy_config = TransferConfig(
            multipart_threshold=MAX_COPY_BYTES,
            multipart_chunksize=MAX_COPY_BYTES,
            max_concurrency=threads,
            use_threads=threads > 1,
        )
        # Path-style addressing for custom endpoints (MinIO, moto, most self-hosted
        # S3s need it; R2 accepts it); AWS itself picks virtual-hosted style.
        config = Config(
            signature_version="s3v4",
            s3={"addressing_style": "path" if endpoint_url else "auto"},
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=60,
            # Every thread of the process shares one client (see `client`): keep that
            # many connections to storage instead of reconnecting past urllib3's 10.
            max_pool_connections=64,
        )
        self.storage = S3Storage(
            bucket_name=bucket,
            endpoint_url=endpoint_url,
            region_name=region,
            client_config=config,
            file_overwrite=True,  # keys are minted by us: a write is meant to land there
            default_acl=None,  # private: nothing in the bucket is public
            querystring_auth=True,
            location="",
            transfer_config=self.transfer_config,
        )
        self._client_lock = threading.Lock()
        self._client: tuple[int, Any] = (0, None)  # (pid that made it, client)

    @classmethod
    def from_settings(cls) -> S3Gateway:
        return cls(
            bucket=settings.AIRLOCK_S3_BUCKET or "",
            endpoint_url=settings.AIRLOCK_S3_ENDPOINT_URL,
            region=settings.AIRLOCK_S3_REGION,
            upload_method=settings.AIRLOCK_S3_UPLOAD_METHOD,
            flavor=settings.AIRLOCK_S3_FLAVOR,
            multipart_threshold=settings.AIRLOCK_S3_MULTIPART.threshold_bytes,
            part_size=settings.AIRLOCK_S3_MULTIPART.part_bytes,
            transfer_chunk_bytes=settings.AIRLOCK_S3_TRANSFER.chunk_bytes,
            transfer_threads=settings.AIRLOCK_S3_TRANSFER.threads,
        )

    @property
    def client(self) -> Any:
        """One boto3 client for all of this process's threads (boto3's clients are thread-safe).

        django-storages' connection is per thread: a boto3 session and resource
        made on a thread's first call, a tenth of a second of CPU or more each (the
        S3 model is parsed again per session), which every request thread of a web
        process would pay in a burst. Made again in a forked child: a client's
        sockets are its process's own.
        """
        pid, client = self._client
        if pid != os.getpid():
            with self._client_lock:
                pid, client = self._client
                if pid != os.getpid():
                    client = self.storage.connection.meta.client
                    self._client = (os.getpid(), client)
        return client

    # --- reads -------------------------------------------------------------------

    def head(self, key: str) -> ObjectInfo | None:
        validate_key(key)
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _is_missing(exc):
                return None
            raise StorageError(f"HEAD {key}: {_code(exc) or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"HEAD {key}: {exc}") from exc
        return ObjectInfo(
            key=key,
            size=int(response["ContentLength"]),
            etag=str(response.get("ETag", "")).strip('"'),
            last_modified=response.get("LastModified"),
        )

    def read_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        chunks = self.iter_chunks(key, chunk_size=min(length, 1 << 20), start=start, end=start + length - 1)
        data = b"".join(chunks)
        return data[:length]

    def iter_chunks(
        self, key: str, *, chunk_size: int = 65536, start: int = 0, end: int | None = None
    ) -> Iterator[bytes]:
        validate_key(key)
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if start or end is not None:
            params["Range"] = f"bytes={start}-{'' if end is None else end}"
        try:
            response = self.client.get_object(**params)
        except ClientError as exc:
            if _code(exc) == "InvalidRange":  # start is past the end: nothing to read
                return
            if _is_missing(exc):
                raise StorageError(f"object {key} is missing") from exc
            raise StorageError(f"GET {key}: {_code(exc) or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"GET {key}: {exc}") from exc
        body = response["Body"]
        try:
            yield from body.iter_chunks(chunk_size)
        except (BotoCoreError, OSError) as exc:
            raise StorageError(f"reading {key}: {exc}") from exc
        finally:
            body.close()

    def prefetch(self, key: str, length: int) -> None:
        """Nothing: an object's GET starts when it is read (a hint only, see LocalGateway.prefetch)."""

    def ensure_bucket(self) -> bool:
        """Create the bucket if it is missing (development stand-ins); True when it was created."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return False
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
                return False  # exists but not ours to inspect (403): leave it alone
        params: dict = {"Bucket": self.bucket}
        region = self.client.meta.region_name
        if region and region != "us-east-1":
            params["CreateBucketConfiguration"] = {"LocationConstraint": region}
        self.client.create_bucket(**params)
        return True

    def scratch_dir(self) -> None:
        return None  # the system temp dir

    def move_file_in(self, key: str, path: Path, *, content_type: str = "") -> int:
        return self.write_file(key, path, content_type=content_type)

    def local_path(self, key: str) -> Path | None:
        return None  # objects live in the bucket: readers download them

    def download_to(self, key: str, path: Path, *, max_bytes: int) -> int:
        written = 0
        with open(path, "wb") as out:
            for chunk in self.iter_chunks(key, chunk_size=1 << 20):
                written += len(chunk)
                if written > max_bytes:
                    raise StorageError(f"object {key} grew past {max_bytes} bytes")
                out.write(chunk)
        return written

    def list_prefix(self, prefix: str) -> Iterator[ObjectInfo]:
        if any(part in {".", ".."} for part in prefix.split("/")):
            raise StorageError(f"refusing prefix {prefix[:100]!r}")
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for entry in page.get("Contents", ()):
                    yield ObjectInfo(
                        key=entry["Key"],
                        size=int(entry["Size"]),
                        etag=str(entry.get("ETag", "")).strip('"'),
                        last_modified=entry.get("LastModified"),
                    )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"LIST {prefix}: {exc}") from exc

    # --- writes ------------------------------------------------------------------

    def write_chunks(self, key: str, chunks: Iterable[bytes], *, content_type: str = "") -> int:
        """Spool, then upload: if the iterable raises (body too large), nothing is written.

        Up to _SPOOL_BYTES stays in memory (one PUT); a larger body goes to a temp file
        that write_file() uploads part by part, never whole in memory.
        """
        validate_key(key)
        held: list[bytes] = []
        written = 0
        spool: Any = None
        try:
            for chunk in chunks:
                written += len(chunk)
                if spool is None and written <= _SPOOL_BYTES:
                    held.append(bytes(chunk))
                    continue
                if spool is None:
                    spool = tempfile.NamedTemporaryFile(prefix="airlock-put-")
                    spool.writelines(held)
                    held.clear()
                spool.write(chunk)
            if spool is None:
                self._save(key, io.BytesIO(b"".join(held)), content_type)
            else:
                spool.flush()
                self.write_file(key, Path(spool.name), content_type=content_type)
        finally:
            if spool is not None:
                spool.close()  # NamedTemporaryFile deletes itself on close
        return written

    def write_file(self, key: str, path: Path, *, content_type: str = "") -> int:
        """Upload a local file; boto3 reads each part from the file as it sends it.

        Not django-storages' save(): that hands boto3 a file object, whose parts
        boto3 reads into memory before sending (up to ten at a time).
        """
        validate_key(key)
        size = Path(path).stat().st_size
        try:
            self.client.upload_file(
                str(path),
                self.bucket,
                key,
                Config=self.transfer_config,
                ExtraArgs={"ContentType": content_type or "application/octet-stream"},
            )
        except (ClientError, BotoCoreError, Boto3Error) as exc:  # a failed part: S3UploadFailedError
            raise StorageError(f"PUT {key}: {exc}") from exc
        return size

    def _save(self, key: str, fh: Any, content_type: str) -> None:
        content = File(fh, name=key)
        # S3Storage takes the object's Content-Type from this attribute.
        content.content_type = content_type or "application/octet-stream"  # type: ignore[attr-defined]
        try:
            saved = self.storage.save(key, content)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"PUT {key}: {exc}") from exc
        if saved != key:  # file_overwrite=True: django-storages must not rename
            raise StorageError(f"storage renamed {key} to {saved}")

    def copy(self, src: str, dst: str) -> str:
        """Copy one object inside the bucket; return the copy's ETag from CopyObject's answer.

        "" for a copy over 5 GiB: the managed copy's part copies do not return the whole object's.
        """
        validate_key(src)
        validate_key(dst)
        source = {"Bucket": self.bucket, "Key": src}
        try:
            try:
                # One request: boto3's managed copy would HEAD the source for its size first.
                response = self.client.copy_object(CopySource=source, Bucket=self.bucket, Key=dst)
                return str(response.get("CopyObjectResult", {}).get("ETag", "")).strip('"')
            except ClientError as exc:
                if _code(exc) not in _TOO_LARGE_TO_COPY:
                    raise
                # Over S3's 5 GiB CopyObject limit: the managed copy splits it into part copies.
                self.client.copy(source, self.bucket, dst, Config=self.copy_config)
                return ""
        except ClientError as exc:
            if _is_missing(exc):
                raise StorageError(f"object {src} is missing") from exc
            raise StorageError(f"COPY {src} → {dst}: {_code(exc) or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"COPY {src} → {dst}: {exc}") from exc

    def delete(self, key: str) -> bool:
        """Delete one object; False when it was not there (S3's DELETE does not say: a HEAD asks first)."""
        if self.head(key) is None:
            return False
        self.delete_unchecked(key)
        return True

    def delete_unchecked(self, key: str) -> None:
        """Delete one object without asking whether it is there (S3's DELETE succeeds either way)."""
        validate_key(key)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"DELETE {key}: {exc}") from exc

    # --- presigned URLs ----------------------------------------------------------

    def presign_upload(
        self, key: str, *, content_type: str, max_bytes: int, expires_in: int, sha256: str = ""
    ) -> UploadInstruction:
        """A presigned POST (size-bounded by its policy), PUT, or multipart set of part PUTs.

        sha256 (hex), when the client declared one, is signed as x-amz-checksum-sha256
        so S3 refuses other bytes. Multipart cannot carry it (S3's checksums there are
        per part, or whole-object for CRCs only): intake's comparison is its check.
        """
        validate_key(key)
        # R2 takes SHA-256 only as a composite (multipart) checksum: a whole-object one is not
        # signed there, and intake's own comparison is the check.
        checksum = sha256_base64(sha256) if sha256 and self.flavor != "r2" else ""
        try:
            if max_bytes > self.multipart_threshold:
                return self._presign_multipart(key, content_type=content_type, total=max_bytes, expires_in=expires_in)
            if self.upload_method == "PUT":
                # Every header is signed. "If-None-Match: *" makes S3 refuse a second
                # PUT to the key (412), so the URL is single-use; the signed
                # Content-Length makes S3 refuse any other size (a store that does not
                # check is caught at intake: HEAD → size_mismatch → quarantine).
                params: dict[str, Any] = {
                    "Bucket": self.bucket,
                    "Key": key,
                    "ContentType": content_type,
                    "IfNoneMatch": "*",
                    "ContentLength": max_bytes,
                }
                headers = {"Content-Type": content_type, "If-None-Match": "*"}
                if checksum:
                    params["ChecksumSHA256"] = checksum
                    headers["x-amz-checksum-sha256"] = checksum
                url = self.client.generate_presigned_url("put_object", Params=params, ExpiresIn=expires_in)
                return UploadInstruction(method="PUT", url=url, headers=headers)
            # The policy makes S3 itself refuse a body over max_bytes, a key other
            # than ours, or another Content-Type (moto does not check; S3 does).
            fields = {"Content-Type": content_type}
            conditions: list[Any] = [{"Content-Type": content_type}, ["content-length-range", 0, max_bytes]]
            if checksum:
                fields["x-amz-checksum-sha256"] = checksum
                conditions.append({"x-amz-checksum-sha256": checksum})
            post = self.client.generate_presigned_post(
                Bucket=self.bucket,
                Key=key,
                Fields=fields,
                Conditions=conditions,
                ExpiresIn=expires_in,
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"presign {key}: {exc}") from exc
        return UploadInstruction(method="POST", url=post["url"], fields=dict(post["fields"]))

    def _presign_multipart(self, key: str, *, content_type: str, total: int, expires_in: int) -> UploadInstruction:
        created = self.client.create_multipart_upload(Bucket=self.bucket, Key=key, ContentType=content_type)
        upload_id = created["UploadId"]
        sizes = part_plan(total, self.part_size)
        parts = self.presign_parts(
            key, upload_id=upload_id, sizes=dict(enumerate(sizes, start=1)), expires_in=expires_in
        )
        return UploadInstruction(method="PUT", url=parts[0].url, parts=parts, part_size=sizes[0], upload_id=upload_id)

    def presign_parts(
        self, key: str, *, upload_id: str, sizes: dict[int, int], expires_in: int
    ) -> tuple[UploadPart, ...]:
        """One presigned PUT per part number; Content-Length is signed, so S3 refuses any other size
        and the parts add up to the declared size and never more."""
        validate_key(key)
        try:
            return tuple(
                UploadPart(
                    part_number=number,
                    size=size,
                    url=self.client.generate_presigned_url(
                        "upload_part",
                        Params={
                            "Bucket": self.bucket,
                            "Key": key,
                            "UploadId": upload_id,
                            "PartNumber": number,
                            "ContentLength": size,
                        },
                        ExpiresIn=expires_in,
                    ),
                )
                for number, size in sorted(sizes.items())
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"presign parts {key}: {exc}") from exc

    def part_sizes(self, total: int) -> dict[int, int]:
        return dict(enumerate(part_plan(total, self.part_size), start=1))

    def _on_upload(self, action: str, key: str, call: Callable[[], Any]) -> Any:
        """Run one call on a multipart upload; None when the upload no longer exists."""
        try:
            return call()
        except ClientError as exc:
            if _code(exc) == "NoSuchUpload" or _status(exc) == 404:
                return None
            raise StorageError(f"{action} {key}: {_code(exc) or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"{action} {key}: {exc}") from exc

    def list_parts(self, key: str, *, upload_id: str) -> dict[int, tuple[str, int]] | None:
        """The parts uploaded so far (number → (etag, size)); None when the upload no longer exists."""
        validate_key(key)

        def pages() -> dict[int, tuple[str, int]]:
            done: dict[int, tuple[str, int]] = {}
            marker = 0
            while True:
                page = self.client.list_parts(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumberMarker=marker)
                done.update((int(p["PartNumber"]), (str(p["ETag"]), int(p["Size"]))) for p in page.get("Parts", []))
                if not page.get("IsTruncated"):
                    return done
                marker = int(page["NextPartNumberMarker"])

        return self._on_upload("list parts", key, pages)

    def complete_multipart(self, key: str, *, upload_id: str, parts: Sequence[tuple[int, str]]) -> bool:
        """Assemble the parts; False when the upload no longer exists (completed or aborted)."""
        validate_key(key)
        listed = [
            {"PartNumber": number, "ETag": etag if etag.startswith('"') else f'"{etag}"'}
            for number, etag in sorted(parts)
        ]
        try:
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": listed}
            )
        except ClientError as exc:
            code = _code(exc)
            if code == "NoSuchUpload":
                return False
            if code in _PARTS_INVALID_CODES:
                raise PartsInvalid(str(exc.response.get("Error", {}).get("Message") or code)) from exc
            raise StorageError(f"complete multipart {key}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"complete multipart {key}: {exc}") from exc
        return True

    def abort_multipart(self, key: str, *, upload_id: str) -> bool:
        """Drop the parts of an unfinished multipart upload; False when it is already gone."""
        validate_key(key)
        return (
            self._on_upload(
                "abort multipart",
                key,
                lambda: self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id) or True,
            )
            is not None
        )

    def list_multipart_uploads(self, prefix: str) -> Iterator[MultipartUploadInfo]:
        """Every unfinished multipart upload under `prefix` (ListMultipartUploads, all pages)."""
        if any(part in {".", ".."} for part in prefix.split("/")):
            raise StorageError(f"refusing prefix {prefix[:100]!r}")
        paginator = self.client.get_paginator("list_multipart_uploads")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for entry in page.get("Uploads", ()):
                    yield MultipartUploadInfo(
                        key=entry["Key"], upload_id=entry["UploadId"], initiated=entry.get("Initiated")
                    )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"LIST multipart uploads {prefix}: {exc}") from exc

    def presign_download(self, key: str, *, content_type: str, disposition: str, expires_in: int) -> str:
        """A short-lived GET whose response type and disposition S3 sets from the signed URL."""
        validate_key(key)
        try:
            return self.client.generate_presigned_url(
                "get_object",
                Params={
                    "Bucket": self.bucket,
                    "Key": key,
                    "ResponseContentType": content_type,
                    "ResponseContentDisposition": disposition,
                    "ResponseCacheControl": "private, no-store",
                },
                ExpiresIn=expires_in,
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"presign GET {key}: {exc}") from exc

    def ping(self) -> None:
        try:
            # Listing one key under our prefix works with the prefix-scoped IAM
            # policy (docs/iam-policy.json); head_bucket would need more.
            self.client.list_objects_v2(Bucket=self.bucket, Prefix="tenants/", MaxKeys=1)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"bucket {self.bucket}: {exc}") from exc

    # --- bucket configuration (manage.py s3_setup) ---------------------------------

    def bucket_cors_rules(self) -> list[dict[str, Any]]:
        """The bucket's CORS rules ([] when it has none)."""
        try:
            return list(self.client.get_bucket_cors(Bucket=self.bucket).get("CORSRules", []))
        except ClientError as exc:
            if _code(exc) == "NoSuchCORSConfiguration":
                return []
            raise StorageError(f"bucket {self.bucket} CORS: {_code(exc) or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"bucket {self.bucket} CORS: {exc}") from exc

    def set_bucket_cors_rules(self, rules: list[dict[str, Any]]) -> None:
        """Replace the bucket's CORS rules (none: the configuration is deleted; S3 refuses an empty one)."""
        try:
            if rules:
                self.client.put_bucket_cors(Bucket=self.bucket, CORSConfiguration={"CORSRules": rules})
            else:
                self.client.delete_bucket_cors(Bucket=self.bucket)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"bucket {self.bucket} CORS: {exc}") from exc

    def bucket_lifecycle_rules(self) -> list[dict[str, Any]]:
        """The bucket's lifecycle rules ([] when it has none)."""
        try:
            return list(self.client.get_bucket_lifecycle_configuration(Bucket=self.bucket).get("Rules", []))
        except ClientError as exc:
            if _code(exc) == "NoSuchLifecycleConfiguration":
                return []
            raise StorageError(f"bucket {self.bucket} lifecycle: {_code(exc) or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"bucket {self.bucket} lifecycle: {exc}") from exc

    def set_bucket_lifecycle_rules(self, rules: list[dict[str, Any]]) -> None:
        """Replace the bucket's lifecycle rules (S3 has no per-rule call: the whole list is written)."""
        try:
            if rules:
                self.client.put_bucket_lifecycle_configuration(
                    Bucket=self.bucket, LifecycleConfiguration={"Rules": rules}
                )
            else:
                self.client.delete_bucket_lifecycle(Bucket=self.bucket)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"bucket {self.bucket} lifecycle: {exc}") from exc
