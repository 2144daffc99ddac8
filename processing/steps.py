"""The pipeline's steps. Each takes the attachment, does its IO and returns facts.

A step raises ContentRejected for a content decision and TransientError (or
lets a StorageError/ScannerError through) for infrastructure trouble.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from attachments.models import Attachment
from attachments.naming import derivative_key
from attachments.profiles import get_profile
from attachments.storage import get_gateway

from .errors import ContentRejected, TransientError
from .sniff import detect_type


@dataclass
class StepResult:
    fields: dict[str, Any] = field(default_factory=dict)
    derivatives: list[dict[str, Any]] = field(default_factory=list)


def intake(attachment: Attachment) -> StepResult:
    """Believe storage, not the claim: size from HEAD, type from the first bytes."""
    profile = get_profile(attachment.profile)
    gateway = get_gateway()
    if gateway.rewritable_uploads and not attachment.content_key:
        _snapshot(attachment)
    info = gateway.head(attachment.working_key)
    if info is None:
        raise ContentRejected("object_missing", "The uploaded object is not in storage.")
    if info.size > profile.max_bytes:
        raise ContentRejected("too_large", f"{info.size} bytes is over the {profile.max_bytes} byte limit.")
    head = gateway.read_range(attachment.working_key, 0, settings.AIRLOCK_SNIFF_BYTES) if info.size else b""
    detected = detect_type(head)
    if not profile.allows(detected):
        signature = _malware_signature(attachment) if info.size <= _SCAN_REJECTS_UP_TO else None
        if signature:
            raise ContentRejected("malware", signature)
        raise ContentRejected(
            "type_not_allowed",
            f"Detected type {detected or 'unknown'} is not allowed for profile {profile.name}.",
        )
    return StepResult(fields={"stored_size": info.size, "content_type": detected})


def _snapshot(attachment: Attachment) -> None:
    """Move the upload to a key only the server writes, before anything looks at it.

    Everything after this reads the snapshot, so bytes replayed onto the upload
    key later are never scanned-then-swapped; the replay itself is deleted when
    its storage event arrives.
    """
    gateway = get_gateway()
    if gateway.head(attachment.storage_key) is None:
        raise ContentRejected("object_missing", "The uploaded object is not in storage.")
    target = derivative_key(tenant_slug=attachment.tenant.slug, attachment_id=attachment.pk, kind="original",
                            ext="bin")
    gateway.copy(attachment.storage_key, target)
    if gateway.head(target) is None:
        raise TransientError("snapshot copy did not verify")
    updated = Attachment.objects.filter(pk=attachment.pk, lease_token=attachment.lease_token).update(
        content_key=target)
    if not updated:
        gateway.delete(target)
        raise TransientError("lost the lease while taking the snapshot")
    attachment.content_key = target
    gateway.delete(attachment.storage_key)


# A file refused for its type is still scanned when small, so that malware is
# reported as malware (the more useful reason for support and for the uploader).
_SCAN_REJECTS_UP_TO = 32 * 1024 * 1024
_LIMIT_HEURISTIC = "Heuristics.Limits.Exceeded"


def _malware_signature(attachment: Attachment) -> str | None:
    from processing.scanners import ScannerError

    try:
        signature = _scan_verdict(attachment)
    except ScannerError:
        return None  # it is rejected either way; the type decides the reason
    return None if signature and _LIMIT_HEURISTIC in signature else signature


def _scan_verdict(attachment: Attachment) -> str | None:
    from processing.scanners import scan_all, scanners_from_settings

    from .metrics import record_scan_verdicts

    gateway = get_gateway()
    scanners = scanners_from_settings()
    if not scanners:
        raise TransientError("no scanner is configured")
    verdicts = scan_all(scanners, lambda: gateway.iter_chunks(attachment.working_key))
    record_scan_verdicts(verdicts)
    infected = [v for v in verdicts if v.outcome != "clean"]
    if infected:
        return f"{infected[0].scanner}: {infected[0].signature or 'infected'}"
    return None


def scan(attachment: Attachment) -> StepResult:
    """Every configured scanner must say clean; an error is never clean."""
    started = time.monotonic()
    signature = _scan_verdict(attachment)
    if signature and _LIMIT_HEURISTIC in signature:
        # clamd gave up on a bound (nesting, file count, size): a bound, not a virus.
        processor = get_profile(attachment.profile).processor
        raise ContentRejected("archive_limit" if processor == "zip" else "too_large", signature)
    if signature:
        raise ContentRejected("malware", signature)
    metadata = dict(attachment.metadata)
    metadata["scan"] = {
        "duration_ms": round((time.monotonic() - started) * 1000, 1),
    }
    return StepResult(fields={"metadata": metadata})


def _original_file(attachment: Attachment, tmp: Path) -> Path:
    """A local path holding the bytes: storage's own file when it has one, else a bounded download."""
    gateway = get_gateway()
    local = gateway.local_path(attachment.working_key)
    if local is not None:
        return local  # upload keys are write-once locally: no copy needed
    path = tmp / "original"
    limit = attachment.stored_size if attachment.stored_size is not None else get_profile(attachment.profile).max_bytes
    size = 0
    with open(path, "wb") as out:
        for chunk in gateway.iter_chunks(attachment.working_key, chunk_size=1 << 20):
            size += len(chunk)
            if size > limit:
                raise TransientError("the object changed size during processing")
            out.write(chunk)
    return path


def _sha256_file(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            size += len(chunk)
            digest.update(chunk)
    return size, digest.hexdigest()


_EXT = {"image/jpeg": "jpg", "image/png": "png", "image/gif": "gif", "image/webp": "webp"}


def derive(attachment: Attachment) -> StepResult:
    """Decode in the sandbox, store derivatives, and describe what will be served."""
    from .sandbox_config import run_sandboxed

    profile = get_profile(attachment.profile)
    gateway = get_gateway()
    tenant_slug = attachment.tenant.slug
    # On the storage's own filesystem when it has one, so derivatives are renamed into place, not copied.
    with tempfile.TemporaryDirectory(prefix="airlock-", dir=gateway.scratch_dir()) as tmp:
        original = _original_file(attachment, Path(tmp))
        if original.stat().st_size != attachment.stored_size:
            raise TransientError("the object changed size during processing")
        result = StepResult(fields={"served_key": attachment.working_key})
        if profile.processor != "image":
            # The original is what gets served: describe it. (Images serve their
            # sanitized rendition, described below, so the original is not hashed.)
            size, sha256 = _sha256_file(original)
            result.fields.update({"size": size, "sha256": sha256})
        if profile.processor is None:
            return result
        work = Path(tmp) / "work"
        work.mkdir()
        outcome = run_sandboxed(profile.processor, original, work)
        if outcome.outcome != "ok":
            raise ContentRejected(outcome.reason_code or "corrupt", outcome.message or "could not be decoded")
        data = outcome.data
        metadata = dict(attachment.metadata)
        derivatives: list[dict[str, Any]] = []
        if profile.processor == "image":
            metadata.update({"width": data.get("width"), "height": data.get("height"), "page_count": None})
        elif profile.processor == "pdf":
            metadata.update({"width": None, "height": None, "page_count": data.get("page_count")})
        elif profile.processor == "zip":
            metadata.update({"entries": data.get("entries"), "total_bytes": data.get("total_bytes"),
                             "nested_archives": data.get("nested_archives")})
        result.fields["metadata"] = metadata

        text_path = outcome.files.get("text")
        if text_path is not None:
            text = Path(text_path).read_text("utf-8", errors="replace")[: settings.AIRLOCK_MAX_TEXT_CHARS]
            result.fields["text"] = text.replace("\x00", "")

        thumb = outcome.files.get("thumbnail")
        metadata["thumbnail"] = None  # the resource reads it here instead of querying derivatives
        if thumb is not None:
            key = derivative_key(tenant_slug=tenant_slug, attachment_id=attachment.pk, kind="thumbnail", ext="webp")
            record = _store(gateway, key, Path(thumb), "image/webp", kind="thumbnail", dims=data.get("thumbnail") or {})
            derivatives.append(record)
            metadata["thumbnail"] = {"width": record["width"], "height": record["height"]}

        sanitized = outcome.files.get("sanitized")
        if sanitized is not None:
            ext = _EXT.get(attachment.content_type, "bin")
            key = derivative_key(tenant_slug=tenant_slug, attachment_id=attachment.pk, kind="sanitized", ext=ext)
            served_sha, served_size = data.get("sanitized_sha256"), data.get("sanitized_size")
            if not served_sha or served_size != Path(sanitized).stat().st_size:
                served_size, served_sha = _sha256_file(Path(sanitized))
            record = _store(gateway, key, Path(sanitized), attachment.content_type, kind="sanitized", dims={})
            derivatives.append(record)
            result.fields.update({"served_key": key, "size": served_size, "sha256": served_sha})
        result.derivatives = derivatives
        return result


def _store(gateway, key: str, path: Path, content_type: str, *, kind: str, dims: dict) -> dict[str, Any]:
    """Write a derivative and read it back: it must be durable before the flip to ready."""
    written = gateway.move_file_in(key, path, content_type=content_type)
    info = gateway.head(key)
    if info is None or info.size != written:
        raise TransientError(f"derivative {kind} did not verify after writing")
    return {"kind": kind, "storage_key": key, "content_type": content_type, "size": written,
            "width": dims.get("width"), "height": dims.get("height")}
