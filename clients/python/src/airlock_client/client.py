"""`Client`: Airlock's HTTP API from Python (sync, httpx)."""

from __future__ import annotations

import hashlib
import mimetypes
import os
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal
from urllib.parse import quote, urljoin

import httpx

from ._http import Sender, storage_error_from_response
from .errors import DownloadMismatch, NotFound, TransportError, WaitTimeout, error_from_response
from .redact import redact_httpx_logs, safe_url, scrub
from .sources import Source
from .types import (
    TERMINAL,
    ArchiveLink,
    Attachment,
    ClientToken,
    Commit,
    Heartbeat,
    Logout,
    ProgressCallback,
    UploadLink,
    Usage,
)
from .uploads import TUS, Progress, Uploader, is_local_plan
from .webhooks import verify_webhook

MIB = 1 << 20
Rendition = Literal["download", "thumbnail", "display", "poster"]
Transport = Literal["auto", "intent", "tus"]
MAX_WAIT = 30  # the server's cap on ?wait=


class Client:
    """A client for one Airlock server and one API token (a host's service token, or a device's client token).

    `subject`: act for one of the host's people (`Airlock-Subject` on every
    request); a client token (`act_…`) already acts for its own subject.

    Uploads go where the server's intent says (its signed PUT, an S3 presigned
    POST or PUT, an S3 multipart plan); files of `tus_threshold` bytes or more
    go through tus instead when the server stores locally, so they can resume.
    429, 503 and 423 answers, and connections that cannot be opened, are
    retried `max_retries` times or for `outage_budget` seconds of waiting,
    whichever is longer, waiting at least the server's `Retry-After` and
    backing off up to `max_backoff` between tries.
    """

    verify_webhook = staticmethod(verify_webhook)

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        subject: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        outage_budget: float = 60.0,
        tus_threshold: int = 32 * MIB,
        tus_chunk_size: int = 8 * MIB,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        redact_httpx_logs()  # httpx logs each request's URL: signed ones carry their credential
        self.tus_threshold = tus_threshold
        self._backend: Literal["local", "s3"] | None = None  # learnt from the first intent
        headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
        if subject is not None:
            headers["Airlock-Subject"] = subject
        self._http = httpx.Client(
            headers=headers,
            timeout=timeout,
            transport=transport,
        )
        # Signed and presigned URLs carry their own credential: the API token never goes to a bucket.
        self._bare = httpx.Client(timeout=timeout, transport=transport)
        retries: dict[str, Any] = {
            "max_retries": max_retries,
            "backoff": backoff,
            "max_backoff": max_backoff,
            "sleep": sleep,
            "outage_budget": outage_budget,
        }
        self._api = Sender(self._http, **retries)
        self._storage = Sender(self._bare, **retries, errors=storage_error_from_response)
        self._uploader = Uploader(self._api, self._storage, self.base_url, tus_chunk_size)

    def close(self) -> None:
        self._http.close()
        self._bare.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _url(self, path: str) -> str:
        return f"{self.base_url}/api/v1/{path.lstrip('/')}"

    def _json(
        self, method: str, path: str, *, ok: tuple[int, ...] = (200,), reconnect: bool = True, **kwargs: Any
    ) -> Any:
        response = self._api.send(method, self._url(path), ok=ok, reconnect=reconnect, **kwargs)
        return response.json() if response.content else None

    # --- uploads -----------------------------------------------------------------------

    def upload(
        self,
        source: str | os.PathLike[str] | BinaryIO,
        *,
        profile: str,
        filename: str | None = None,
        content_type: str | None = None,
        sha256: str | bool | None = None,
        on_progress: ProgressCallback | None = None,
        transport: Transport = "auto",
    ) -> Attachment:
        """Upload a file (a path or a binary file object from its current position); returns it `pending`.

        `sha256`: None or True computes the digest (one more pass over a seekable
        file; a stream is hashed while it is read aside) and declares it, so the
        server refuses other bytes; a string declares that digest; False declares
        none. tus uploads cannot declare one: each chunk carries its own checksum.
        `transport`: "intent" never uses tus, "tus" always does.
        An UploadInterrupted error names the attachment: `resume(id, source)`.
        """
        with Source.open(source, filename) as src:
            ctype = content_type or mimetypes.guess_type(src.filename)[0] or "application/octet-stream"
            progress = Progress(src.size, on_progress)
            large = src.size >= self.tus_threshold
            if transport == "tus" or (transport == "auto" and large and self._backend == "local"):
                return self._upload_tus(src, profile=profile, content_type=ctype, progress=progress)
            body: dict[str, Any] = {
                "profile": profile,
                "filename": src.filename,
                "size": src.size,
                "content_type": ctype,
            }
            if sha256 is None or sha256 is True:
                body["sha256"] = src.sha256()
            elif sha256:
                body["sha256"] = sha256
            intent = self.create_intent(**body)
            plan = intent["upload"]
            self._backend = "local" if is_local_plan(plan) else "s3"
            if transport == "auto" and large and self._backend == "local":
                # Only now is it known that the bytes would go to Airlock in one PUT: tus can resume.
                self.discard(intent["id"])
                return self._upload_tus(src, profile=profile, content_type=ctype, progress=progress)
            return self._uploader.send_plan(src, intent["id"], plan, progress)

    def create_intent(
        self, *, profile: str, filename: str, size: int, content_type: str, sha256: str | None = None
    ) -> dict[str, Any]:
        """Declare a file and get its plan (`upload`) without sending it: for a browser that sends the bytes.

        The plan's URLs carry their own single-use, expiring credential, so a host
        can hand `intent["upload"]` to a browser and keep its API token to itself;
        then `complete(id)` once the browser is done (harmless where not needed).
        """
        body: dict[str, Any] = {"profile": profile, "filename": filename, "size": size, "content_type": content_type}
        if sha256:
            body["sha256"] = sha256
        # Nothing is created on 429/503, so the intent is safe to ask again; a lost answer is not.
        return self._json("POST", "uploads", ok=(201,), reconnect=False, json=body)  # type: ignore[no-any-return]

    def complete(self, attachment_id: str) -> Attachment:
        """Tell Airlock the bytes of a single-request plan are in place (S3 without bucket events); returns it."""
        return self._uploader.complete(attachment_id, None)

    def _upload_tus(self, src: Source, *, profile: str, content_type: str, progress: Progress) -> Attachment:
        url = self._uploader.tus_create(src, profile=profile, content_type=content_type)
        self._uploader.tus_send(src, url, progress, offset=0)
        return self.get(url.rstrip("/").rsplit("/", 1)[-1])

    def resume(
        self,
        attachment_id: str,
        source: str | os.PathLike[str] | BinaryIO,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> Attachment:
        """Carry on an interrupted tus or S3 multipart upload with the same bytes, from where storage stopped."""
        with Source.open(source) as src:
            progress = Progress(src.size, on_progress)
            url = self._url(f"tus/{attachment_id}")
            try:
                offset = self._uploader.tus_offset(url)
            except NotFound:  # not a tus upload: an S3 multipart one (or nothing to resume: 409)
                return self._uploader.resume_multipart(src, attachment_id, progress)
            self._uploader.tus_send(src, url, progress, offset=offset)
            return self.get(attachment_id)

    def cancel_tus(self, attachment_id: str) -> None:
        """Terminate a tus upload: its bytes are removed and the intent discarded."""
        self._api.send("DELETE", self._url(f"tus/{attachment_id}"), ok=(204,), reconnect=True, headers=TUS)

    # --- reading -----------------------------------------------------------------------

    def get(self, attachment_id: str) -> Attachment:
        return self._json("GET", f"attachments/{attachment_id}")  # type: ignore[no-any-return]

    def wait(self, attachment_id: str, timeout: float = 60.0) -> Attachment:
        """Block until the attachment is ready, rejected or failed (server-side `?wait=`, no polling)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            wait = max(0, min(MAX_WAIT, int(remaining)))
            response = self._api.send(
                "GET",
                self._url(f"attachments/{attachment_id}"),
                reconnect=True,
                params={"wait": wait},
                timeout=wait + 30,
            )
            attachment: Attachment = response.json()
            if attachment["status"] in TERMINAL:
                return attachment
            if time.monotonic() >= deadline or wait == 0:
                raise WaitTimeout(
                    f"{attachment_id} is still {attachment['status']} after {timeout:g} s", attachment=dict(attachment)
                )
            if response.headers.get("Airlock-Wait", "").startswith("skipped"):
                self._api.sleep(1.0)  # the server is at its waiter cap: do not ask again at once

    def iter_attachments(self, **filters: Any) -> Iterator[Attachment]:
        """The caller's attachments, newest first, across every page (filters: status, profile, committed, ids…)."""
        params: dict[str, str] | None = {
            key: _query_value(value) for key, value in filters.items() if value is not None
        }
        url: str | None = self._url("attachments")
        while url:
            page = self._api.send("GET", url, params=params, reconnect=True).json()
            yield from page["results"]
            # `next` carries the filters and the cursor; httpx would replace its query with any params.
            url, params = page.get("next"), None

    def usage(self) -> Usage:
        return self._json("GET", "usage")  # type: ignore[no-any-return]

    def profiles(self) -> list[dict[str, Any]]:
        return self._json("GET", "profiles")["profiles"]  # type: ignore[no-any-return]

    def download(
        self,
        attachment_id: str,
        to: str | os.PathLike[str],
        *,
        rendition: Rendition = "download",
        on_progress: ProgressCallback | None = None,
    ) -> Path:
        """Save a file to `to`, resuming a partial `<to>.part` with a Range request; checks size and SHA-256."""
        target = Path(to)
        partial = target.with_name(target.name + ".part")
        expected = self.get(attachment_id) if rendition == "download" else None
        url = self._url(f"attachments/{attachment_id}/{rendition}")
        failures = 0
        while True:
            try:
                total = self._fetch(url, partial, on_progress)
                break
            except TransportError:
                failures += 1
                if failures > self._api.max_retries:
                    raise
                self._api.sleep(self._api.delay(failures - 1, None))
        if expected is not None and expected.get("sha256"):
            _check(partial, total, expected)
        partial.replace(target)
        return target

    def _fetch(self, url: str, partial: Path, on_progress: ProgressCallback | None) -> int:
        """GET into `partial` from its current length; the total size of the file."""
        have = partial.stat().st_size if partial.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            # A redirect to S3 drops the Authorization header (another origin) and keeps the Range.
            with self._http.stream("GET", url, headers=headers, follow_redirects=True) as response:
                if response.status_code == 416:
                    total = int(response.headers.get("Content-Range", "*/-1").rsplit("/", 1)[-1])
                    if total == have:
                        return total  # the partial file was already complete
                    partial.unlink()  # longer than the file: not its beginning
                    return self._fetch(url, partial, on_progress)
                if response.status_code not in (200, 206):
                    response.read()
                    raise error_from_response(response)
                if response.status_code == 200:
                    have = 0  # the whole file: the server ignored or could not honour the range
                    total = int(response.headers.get("Content-Length", -1))
                else:
                    start, total = _content_range(response.headers.get("Content-Range", ""))
                    if start != have:
                        raise DownloadMismatch(f"asked for bytes from {have}, got a range from {start}")
                with partial.open("ab" if have else "wb") as out:
                    for chunk in response.iter_bytes():
                        out.write(chunk)
                        have += len(chunk)
                        if on_progress is not None:
                            on_progress(have, total)
                return total if total >= 0 else have
        except httpx.TransportError as exc:
            raise TransportError(f"GET {safe_url(url)}: {scrub(exc)!r}") from exc

    # --- lifecycle -----------------------------------------------------------------------

    def commit(self, ids: Iterable[str], ref: str, *, replace: bool = False) -> Commit:
        """Bind staged attachments to `ref` (all or nothing: AttachmentInvalid names what is unusable)."""
        body = {"ids": list(ids), "ref": ref, "replace": replace}
        return self._json("POST", "attachments/commit", json=body)  # type: ignore[no-any-return]

    def heartbeat(self, ids: Iterable[str]) -> Heartbeat:
        """Keep staged drafts alive (their `expires_at` moves on, never past the hard cap)."""
        return self._json("POST", "attachments/heartbeat", json={"ids": list(ids)})  # type: ignore[no-any-return]

    def discard(self, attachment_id: str) -> None:
        self._json("POST", f"attachments/{attachment_id}/discard", ok=(204,))

    def discard_all(self) -> int:
        return int(self._json("POST", "attachments/discard-all")["discarded"])

    def release(self, ids: Iterable[str] | None = None, *, ref: str | None = None) -> list[str]:
        """Let committed files go (by ids, or every file of `ref`); restorable during the grace."""
        if (ids is None) == (ref is None):
            raise ValueError("release takes ids or ref, exactly one of them")
        body: dict[str, Any] = {"ref": ref} if ref is not None else {"ids": list(ids or ())}
        return self._json("POST", "attachments/release", json=body)["released"]  # type: ignore[no-any-return]

    def approve(self, ids: Iterable[str] | None = None, *, ref: str | None = None) -> dict[str, Any]:
        """Approve files sent through a link that requires approval (by ids, or every pending file of `ref`)."""
        return self._json("POST", "attachments/approve", json=_ids_or_ref("approve", ids, ref))  # type: ignore[no-any-return]

    def decline(self, ids: Iterable[str] | None = None, *, ref: str | None = None) -> dict[str, Any]:
        """Decline files waiting for approval (by ids, or every pending file of `ref`): they are discarded."""
        return self._json("POST", "attachments/decline", json=_ids_or_ref("decline", ids, ref))  # type: ignore[no-any-return]

    def archive_link(self, ref: str, *, renditions: str | None = None) -> ArchiveLink:
        """A signed link to a ZIP of every available file of `ref` (for an `<a href>` that sends no header).

        `renditions="web"`: videos whose web rendition is ready go in as that MP4.
        """
        params = {"renditions": renditions} if renditions is not None else None
        link: ArchiveLink = self._json("GET", f"refs/{quote(ref, safe='')}/archive-link", params=params)
        link["url"] = urljoin(self.base_url + "/", link["url"])
        return link

    def restore(self, attachment_id: str) -> None:
        self._json("POST", f"attachments/{attachment_id}/restore", ok=(204,))

    def delete(self, attachment_id: str) -> None:
        self._json("DELETE", f"attachments/{attachment_id}", ok=(204,))

    # --- client tokens (a host's service token only) ----------------------------------------

    def mint_client_token(
        self,
        subject: str,
        ttl_seconds: int,
        *,
        profiles: Iterable[str] | None = None,
        ref: str | None = None,
        max_files: int | None = None,
        max_bytes: int | None = None,
    ) -> ClientToken:
        """A short-lived token for one of your people's devices: it uploads and reads for `subject` only.

        Hand `token` to the device (`Client(base_url, token)` there, or a browser's
        `Authorization: Bearer`); it never sees your service token.
        """
        body: dict[str, Any] = {"subject": subject, "ttl_seconds": ttl_seconds}
        grant = {"ref": ref, "max_files": max_files, "max_bytes": max_bytes}
        body.update({key: value for key, value in grant.items() if value is not None})
        if profiles is not None:
            body["profiles"] = list(profiles)
        # A lost answer would leave a token nobody holds: harmless, so safe to ask again.
        return self._json("POST", "client-tokens", ok=(201,), json=body)  # type: ignore[no-any-return]

    def revoke_client_token(self, token_id: str) -> None:
        """The token answers 401 from now on (idempotent)."""
        self._json("DELETE", f"client-tokens/{token_id}", ok=(204,))

    def logout_subject(self, subject: str) -> Logout:
        """Revoke every client token of `subject` and discard its staged uploads (held drafts stay)."""
        return self._json("POST", "subjects/logout", json={"subject": subject})  # type: ignore[no-any-return]

    # --- upload links (a host's service token only) ------------------------------------------

    def create_upload_link(
        self,
        ref: str,
        expires_at: datetime | str,
        *,
        title: str | None = None,
        profiles: Iterable[str] | None = None,
        requires_approval: bool | None = None,
        max_files_per_guest: int | None = None,
        max_bytes_per_guest: int | None = None,
        max_files: int | None = None,
    ) -> UploadLink:
        """A link (and its QR code) through which guests without an account upload to `ref` from Airlock's page.

        Hand `url` (or the QR code) to the guests; with `requires_approval` their files
        wait for `approve` before they count for `ref`.
        """
        body: dict[str, Any] = {
            "ref": ref,
            "expires_at": expires_at.isoformat() if isinstance(expires_at, datetime) else expires_at,
        }
        optional = {
            "title": title,
            "requires_approval": requires_approval,
            "max_files_per_guest": max_files_per_guest,
            "max_bytes_per_guest": max_bytes_per_guest,
            "max_files": max_files,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        if profiles is not None:
            body["profiles"] = list(profiles)
        # A lost answer leaves a link nobody handed out: harmless, so safe to ask again.
        return self._json("POST", "upload-links", ok=(201,), json=body)  # type: ignore[no-any-return]

    def get_upload_link(self, link_id: str) -> UploadLink:
        return self._json("GET", f"upload-links/{link_id}")  # type: ignore[no-any-return]

    def iter_upload_links(self, **filters: Any) -> Iterator[UploadLink]:
        """The caller's upload links, across every page."""
        params: dict[str, str] | None = {
            key: _query_value(value) for key, value in filters.items() if value is not None
        }
        url: str | None = self._url("upload-links")
        while url:
            page = self._api.send("GET", url, params=params, reconnect=True).json()
            yield from page["results"]
            url, params = page.get("next"), None

    def disable_upload_link(self, link_id: str) -> None:
        """Guests can no longer open or send through the link (its page says so; the API answers 410)."""
        self._json("DELETE", f"upload-links/{link_id}", ok=(204,))

    def upload_link_qr(self, link: UploadLink, *, format: Literal["svg", "png"] = "svg") -> bytes:
        """The link's QR code image (SVG or PNG), to print or to serve from the host's own pages."""
        url = urljoin(self.base_url + "/", link["qr_svg_url" if format == "svg" else "qr_png_url"])
        # Airlock's own URL: it may take the API token; never send the token anywhere else.
        sender = self._api if url.startswith(self.base_url + "/") else self._storage
        return sender.send("GET", url, ok=(200,), reconnect=True).content


def _ids_or_ref(verb: str, ids: Iterable[str] | None, ref: str | None) -> dict[str, Any]:
    if (ids is None) == (ref is None):
        raise ValueError(f"{verb} takes ids or ref, exactly one of them")
    return {"ref": ref} if ref is not None else {"ids": list(ids or ())}


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(item) for item in value)
    return str(value)


def _content_range(value: str) -> tuple[int, int]:
    """`bytes 100-199/1000` → (100, 1000); total -1 when unknown."""
    try:
        spec, total = value.split(" ", 1)[1].split("/", 1)
        return int(spec.split("-", 1)[0]), (-1 if total == "*" else int(total))
    except (IndexError, ValueError):
        raise DownloadMismatch(f"unreadable Content-Range: {value!r}") from None


def _check(path: Path, total: int, expected: Attachment) -> None:
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(MIB):
            digest.update(chunk)
    if size != expected.get("size", size) or digest.hexdigest() != expected.get("sha256"):
        path.unlink()  # a resumed file that does not add up is not worth resuming again
        raise DownloadMismatch(
            f"downloaded {size} bytes with SHA-256 {digest.hexdigest()}; the attachment "
            f"has {expected.get('size')} bytes with {expected.get('sha256')}"
        )
