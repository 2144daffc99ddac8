"""Sending the bytes: the signed PUT, S3 presigned POST/PUT, S3 multipart (re-signing parts), and tus.

Each sender resumes what it can inside the call (tus asks the server's offset,
multipart keeps the parts S3 has and re-signs expired URLs) and otherwise
raises UploadInterrupted, which `Client.resume` picks up later.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ._http import Sender
from .errors import (
    AlreadyUploaded,
    InternalError,
    OffsetMismatch,
    RequestTimeout,
    Retryable,
    StorageError,
    TransportError,
    UploadInterrupted,
)
from .sources import Source
from .types import Attachment, ProgressCallback

TUS = {"Tus-Resumable": "1.0.0"}
_LOCAL_CONTENT = re.compile(r"/api/v1/uploads/[0-9a-fA-F-]{36}/content$")
# Worth another try once the server is asked where things stand: nothing about the request was wrong.
_TRANSIENT = (TransportError, Retryable, RequestTimeout, InternalError, OffsetMismatch)


class Progress:
    def __init__(self, total: int, callback: ProgressCallback | None) -> None:
        self.total = total
        self.sent = 0
        self.callback = callback

    def set(self, sent: int) -> None:
        self.sent = sent
        if self.callback is not None:
            self.callback(sent, self.total)

    def add(self, count: int) -> None:
        self.set(self.sent + count)

    def stream(self, source: Source, start: int, end: int) -> Iterator[bytes]:
        """The bytes start..end, counted as they are handed to the connection (again from `start` on a retry)."""
        self.set(start)
        for chunk in source.iter_range(start, end, 256 * 1024):
            yield chunk
            self.add(len(chunk))


@dataclass
class Uploader:
    api: Sender  # Airlock's own endpoints, with the API token
    storage: Sender  # signed and presigned URLs: never the API token
    base_url: str
    tus_chunk_size: int

    # --- an intent's plan: PUT, POST or multipart ------------------------------------

    def send_plan(self, source: Source, attachment_id: str, plan: dict[str, Any], progress: Progress) -> Attachment:
        if plan.get("parts"):
            return self.multipart(
                source,
                attachment_id,
                part_size=int(plan["part_size"]),
                parts=plan["parts"],
                complete_url=plan["complete_url"],
                uploaded={},
                progress=progress,
            )
        local = is_local_plan(plan)
        try:
            response = self.storage.send(
                plan["method"],
                plan["url"],
                ok=(200, 201, 202, 204),
                reconnect=True,
                **self._single_request(source, plan, progress),
            )
        except AlreadyUploaded:
            # A retry after an attempt whose answer was lost: the bytes are in (local backend).
            return self.attachment(attachment_id)
        except StorageError as exc:
            if exc.code != "PreconditionFailed":  # S3 PUT: If-None-Match says an earlier attempt landed
                raise
            response = None
        except (TransportError, OSError) as exc:
            raise UploadInterrupted(
                f"the upload of {source.filename} was interrupted: {exc}",
                attachment_id=attachment_id,
                transport="single",
                sent=progress.sent,
            ) from exc
        if local and response is not None:
            return response.json()  # type: ignore[no-any-return]
        return self.complete(attachment_id, None)

    def _single_request(self, source: Source, plan: dict[str, Any], progress: Progress) -> dict[str, Any]:
        if plan["method"] == "PUT":
            headers = {**plan.get("headers", {}), "Content-Length": str(source.size)}
            return {"headers": headers, "content": lambda: progress.stream(source, 0, source.size)}
        form = _FormFile(source, progress)
        content_type = plan.get("fields", {}).get("Content-Type", "application/octet-stream")
        return {"data": plan.get("fields", {}), "files": {"file": (source.filename, form, content_type)}}

    def complete(self, attachment_id: str, parts: list[dict[str, Any]] | None, url: str | None = None) -> Attachment:
        url = url or f"{self.base_url}/api/v1/uploads/{attachment_id}/complete"
        response = self.api.send("POST", url, json={"parts": parts} if parts else {}, ok=(202,), reconnect=True)
        return response.json()  # type: ignore[no-any-return]

    def attachment(self, attachment_id: str) -> Attachment:
        url = f"{self.base_url}/api/v1/attachments/{attachment_id}"
        return self.api.send("GET", url, reconnect=True).json()  # type: ignore[no-any-return]

    # --- S3 multipart ------------------------------------------------------------------

    def multipart(
        self,
        source: Source,
        attachment_id: str,
        *,
        part_size: int,
        parts: list[dict[str, Any]],
        complete_url: str,
        uploaded: dict[int, str],
        progress: Progress,
    ) -> Attachment:
        """PUT every part not in `uploaded` (number → ETag), re-signing when URLs expire, then assemble."""
        urls = {int(p["part_number"]): p["url"] for p in parts}
        count = max(1, -(-source.size // part_size))
        progress.set(
            sum(_part_range(n, part_size, source.size)[1] - _part_range(n, part_size, source.size)[0] for n in uploaded)
        )
        for number in range(1, count + 1):
            if number in uploaded:
                continue
            start, end = _part_range(number, part_size, source.size)
            resigned = False
            while True:
                try:
                    response = self.storage.send(
                        "PUT",
                        urls[number],
                        ok=(200,),
                        reconnect=True,
                        headers={"Content-Length": str(end - start)},
                        content=lambda: progress.stream(source, start, end),
                    )
                    uploaded[number] = response.headers["ETag"]
                    break
                except StorageError as exc:
                    if exc.status != 403 or resigned:
                        raise
                    # The part URLs expired (or were signed for another clock): fresh ones, once.
                    resigned = True
                    urls.update(self.resign(attachment_id)[0])
                except (TransportError, OSError) as exc:
                    progress.set(start)
                    raise UploadInterrupted(
                        f"part {number} of {source.filename} did not arrive: {exc}",
                        attachment_id=attachment_id,
                        transport="multipart",
                        sent=progress.sent,
                    ) from exc
        progress.set(source.size)
        body = [{"part_number": n, "etag": etag} for n, etag in sorted(uploaded.items())]
        return self.complete(attachment_id, body, complete_url)

    def resign(self, attachment_id: str) -> tuple[dict[int, str], dict[int, str], dict[str, Any]]:
        """Fresh URLs for the parts not in storage, and the ETags of those that are."""
        url = f"{self.base_url}/api/v1/uploads/{attachment_id}/parts"
        plan = self.api.send("POST", url, reconnect=True).json()
        fresh = {int(p["part_number"]): p["url"] for p in plan["parts"]}
        done = {int(p["part_number"]): p["etag"] for p in plan["uploaded_parts"]}
        return fresh, done, plan

    def resume_multipart(self, source: Source, attachment_id: str, progress: Progress) -> Attachment:
        fresh, done, plan = self.resign(attachment_id)
        parts = [{"part_number": n, "url": u} for n, u in fresh.items()]
        return self.multipart(
            source,
            attachment_id,
            part_size=int(plan["part_size"]),
            parts=parts,
            complete_url=plan["complete_url"],
            uploaded=done,
            progress=progress,
        )

    # --- tus ----------------------------------------------------------------------------

    def tus_create(self, source: Source, *, profile: str, content_type: str) -> str:
        metadata = ",".join(
            f"{key} {base64.b64encode(value.encode()).decode()}"
            for key, value in (("profile", profile), ("filename", source.filename), ("content_type", content_type))
        )
        response = self.api.send(
            "POST",
            f"{self.base_url}/api/v1/tus/",
            ok=(201,),
            headers={**TUS, "Upload-Length": str(source.size), "Upload-Metadata": metadata},
        )
        return response.headers["Location"]

    def tus_offset(self, url: str) -> int:
        response = self.api.send("HEAD", url, ok=(200,), reconnect=True, headers=TUS)
        return int(response.headers["Upload-Offset"])

    def tus_send(self, source: Source, url: str, progress: Progress, *, offset: int | None = None) -> None:
        """PATCH from the server's offset to the end; after a failure, HEAD and carry on from there."""
        attachment_id = url.rstrip("/").rsplit("/", 1)[-1]
        offset = self.tus_offset(url) if offset is None else offset
        progress.set(offset)
        failures = 0
        while offset < source.size:
            try:
                chunk = source.read_at(offset, self.tus_chunk_size)
                checksum = base64.b64encode(hashlib.sha256(chunk).digest()).decode()
                response = self.api.send(
                    "PATCH",
                    url,
                    ok=(204,),
                    content=chunk,
                    headers={
                        **TUS,
                        "Upload-Offset": str(offset),
                        "Content-Type": "application/offset+octet-stream",
                        "Upload-Checksum": f"sha256 {checksum}",
                    },
                )
                reached = int(response.headers["Upload-Offset"])
            except OSError as exc:  # the caller's file, not the network: resume once it reads again
                raise UploadInterrupted(
                    f"reading {source.filename} at {offset} bytes failed: {exc}",
                    attachment_id=attachment_id,
                    transport="tus",
                    sent=offset,
                ) from exc
            except _TRANSIENT as exc:
                failures += 1
                if failures > self.api.max_retries:
                    raise UploadInterrupted(
                        f"the tus upload of {source.filename} stopped at {offset} bytes: {exc}",
                        attachment_id=attachment_id,
                        transport="tus",
                        sent=offset,
                    ) from exc
                self.api.sleep(self.api.delay(failures - 1, getattr(exc, "retry_after", None)))
                try:
                    reached = self.tus_offset(url)
                except (TransportError, Retryable) as lost:
                    raise UploadInterrupted(
                        f"the tus upload of {source.filename} stopped at {offset} bytes: {lost}",
                        attachment_id=attachment_id,
                        transport="tus",
                        sent=offset,
                    ) from lost
            if reached > offset:
                failures = 0  # progress was made: the budget is for failures in a row
            offset = reached
            progress.set(offset)


class _FormFile(io.RawIOBase):
    """The file part of a presigned POST: reads the source, reports progress, tells httpx its length."""

    def __init__(self, source: Source, progress: Progress) -> None:
        self.source = source
        self.progress = progress
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.source.size}[whence]
        self.position = max(0, min(self.source.size, base + offset))
        return self.position

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self.source.size - self.position
        chunk = self.source.read_at(self.position, size)
        self.position += len(chunk)
        self.progress.set(self.position)
        return chunk


def _part_range(number: int, part_size: int, size: int) -> tuple[int, int]:
    start = (number - 1) * part_size
    return start, min(size, start + part_size)


def is_local_plan(plan: dict[str, Any]) -> bool:
    """Whether the plan sends the bytes to Airlock itself (its signed PUT) rather than to a bucket."""
    return plan.get("method") == "PUT" and bool(_LOCAL_CONTENT.search(urlsplit(plan.get("url", "")).path))
