"""Errors typed from the API's error codes (docs/api.md#errors), plus the client's own."""

from __future__ import annotations

from typing import Any

import httpx

from .redact import redact, redact_value


class AirlockError(Exception):
    """An error answered by Airlock (`code`, `status`, `details`) or met on the way to it.

    `retry_after` is the server's `Retry-After` in seconds, when it sent one.
    The message and details never carry a URL's query, a token or a signature
    (airlock_client.redact): host apps log exceptions whole.
    """

    code: str = "ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        self.details: dict[str, Any] = redact_value(details) if details else {}
        self.retry_after = retry_after
        self.request_id = request_id

    def __str__(self) -> str:
        where = f" (HTTP {self.status})" if self.status else ""
        return f"{self.code}{where}: {self.message}"


class ValidationError(AirlockError):
    code = "VALIDATION_ERROR"


class UnknownProfile(ValidationError):
    code = "UNKNOWN_PROFILE"


class TypeNotAllowed(ValidationError):
    code = "TYPE_NOT_ALLOWED"


class NotAuthenticated(AirlockError):
    code = "NOT_AUTHENTICATED"


class UploadTokenInvalid(AirlockError):
    code = "UPLOAD_TOKEN_INVALID"


class NotFound(AirlockError):
    code = "NOT_FOUND"


class Conflict(AirlockError):
    """A 409: the request does not fit the attachment's state."""

    code = "CONFLICT"


class AlreadyCommitted(Conflict):
    code = "ALREADY_COMMITTED"


class NotRestorable(Conflict):
    code = "NOT_RESTORABLE"


class AlreadyUploaded(Conflict):
    code = "ALREADY_UPLOADED"


class UploadNotInProgress(Conflict):
    code = "UPLOAD_NOT_IN_PROGRESS"


class OffsetMismatch(Conflict):
    code = "OFFSET_MISMATCH"


class UploadExpired(AirlockError):
    code = "UPLOAD_EXPIRED"


class TooLarge(AirlockError):
    code = "TOO_LARGE"


class QuotaExceeded(AirlockError):
    """The tenant's quota has no room: `details` has `quota`, `used`, `limit`, `requested`."""

    code = "QUOTA_EXCEEDED"


class ChecksumMismatch(AirlockError):
    code = "CHECKSUM_MISMATCH"


class AttachmentInvalid(AirlockError):
    """Commit or release refused: `details` maps each unusable id to its reason."""

    code = "ATTACHMENT_INVALID"


class Retryable(AirlockError):
    """The server asked to try again later (`retry_after`); the client already retried."""


class UploadLocked(Retryable):
    code = "UPLOAD_LOCKED"


class RateLimited(Retryable):
    code = "RATE_LIMITED"


class ServiceUnavailable(Retryable):
    code = "UNAVAILABLE"


class RequestTimeout(AirlockError):
    code = "REQUEST_TIMEOUT"


class InternalError(AirlockError):
    code = "INTERNAL"


class TransportError(AirlockError):
    """The request did not get an answer (connection refused or cut, timeout)."""

    code = "TRANSPORT"


class StorageError(AirlockError):
    """The bucket (S3) refused a presigned request; `code` is S3's (e.g. `AccessDenied`, `BadDigest`)."""


class UploadInterrupted(AirlockError):
    """The bytes did not all arrive; `Client.resume(attachment_id, source)` carries on where they stopped."""

    code = "UPLOAD_INTERRUPTED"

    def __init__(self, message: str, *, attachment_id: str, transport: str, sent: int) -> None:
        super().__init__(message)
        self.attachment_id = attachment_id
        self.transport = transport
        self.sent = sent


class WaitTimeout(AirlockError):
    """`wait` ran out of time before the attachment reached a final status (`attachment` is its last state)."""

    code = "WAIT_TIMEOUT"

    def __init__(self, message: str, *, attachment: dict[str, Any]) -> None:
        super().__init__(message)
        self.attachment = attachment


class DownloadMismatch(AirlockError):
    """The downloaded bytes are not the size or SHA-256 the attachment resource announced."""

    code = "DOWNLOAD_MISMATCH"


class WebhookVerificationError(AirlockError):
    """A webhook that is not signed by a known secret, is malformed, or is too old or too new."""

    code = "WEBHOOK_INVALID"


_BY_CODE: dict[str, type[AirlockError]] = {
    cls.code: cls
    for cls in (
        ValidationError,
        UnknownProfile,
        TypeNotAllowed,
        NotAuthenticated,
        UploadTokenInvalid,
        NotFound,
        AlreadyCommitted,
        NotRestorable,
        AlreadyUploaded,
        UploadNotInProgress,
        OffsetMismatch,
        UploadExpired,
        TooLarge,
        QuotaExceeded,
        ChecksumMismatch,
        AttachmentInvalid,
        UploadLocked,
        RateLimited,
        ServiceUnavailable,
        RequestTimeout,
        InternalError,
    )
}
# Codes not in the table (a newer server, the framework's generic `ERROR`) map by status.
_BY_STATUS: dict[int, type[AirlockError]] = {
    400: ValidationError,
    401: NotAuthenticated,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    422: AttachmentInvalid,
    423: UploadLocked,
    429: RateLimited,
    503: ServiceUnavailable,
    500: InternalError,
}


def retry_after_seconds(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: Airlock always sends seconds


def error_from_response(response: httpx.Response) -> AirlockError:
    """The typed error for an Airlock error response (any status ≥ 400)."""
    code, message = "ERROR", response.reason_phrase or f"HTTP {response.status_code}"
    details: dict[str, Any] = {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        code = str(error.get("code") or code)
        message = str(error.get("message") or message)
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
    cls = _BY_CODE.get(code) or _BY_STATUS.get(response.status_code, AirlockError)
    return cls(
        message,
        code=code,
        status=response.status_code,
        details=details,
        retry_after=retry_after_seconds(response),
        request_id=response.headers.get("X-Request-ID"),
    )
