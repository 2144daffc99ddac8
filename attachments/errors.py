"""Domain errors carrying the contract's code, HTTP status and details."""

from __future__ import annotations

from typing import Any


class AirlockError(Exception):
    code = "ERROR"
    status = 400
    default_message = "Request failed."

    def __init__(
        self,
        message: str | None = None,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.details = details or {}
        self.headers = headers or {}
        super().__init__(self.message)


class ValidationFailed(AirlockError):
    code, status, default_message = "VALIDATION_ERROR", 400, "The request is not valid."


class UnknownProfile(AirlockError):
    code, status, default_message = "UNKNOWN_PROFILE", 400, "Unknown profile."


class TypeNotAllowed(AirlockError):
    code, status, default_message = "TYPE_NOT_ALLOWED", 400, "This content type is not allowed for the profile."


class NotAuthenticated(AirlockError):
    code, status, default_message = (
        "NOT_AUTHENTICATED",
        401,
        "Authentication credentials were not provided or are invalid.",
    )


class UploadTokenInvalid(AirlockError):
    code, status, default_message = "UPLOAD_TOKEN_INVALID", 403, "The upload URL is invalid, expired or already used."


class SignatureInvalid(AirlockError):
    code, status, default_message = (
        "SIGNATURE_INVALID",
        403,
        "The signed URL is malformed, tampered with, or signed with a retired key.",
    )


class UrlExpired(AirlockError):
    code, status, default_message = "URL_EXPIRED", 403, "The signed URL has expired; read the resource for a new link."


class OutOfScope(AirlockError):
    # A client token reaches only what its host granted (docs/api.md, "Client tokens").
    code, status, default_message = (
        "CLIENT_TOKEN_SCOPE",
        403,
        "A client token cannot do this: use the host's service token.",
    )


class NotFound(AirlockError):
    code, status, default_message = "NOT_FOUND", 404, "Not found."


class AlreadyCommitted(AirlockError):
    code, status, default_message = "ALREADY_COMMITTED", 409, "The attachment is committed."


class NotReady(AirlockError):
    # details: {"status": "pending" | "processing"}: the owner's file exists, its bytes are not served yet.
    code, status, default_message = "NOT_READY", 409, "The file is not ready: nothing is served until it is checked."


class NotRestorable(AirlockError):
    code, status, default_message = "NOT_RESTORABLE", 409, "Only a released file can be restored, within its grace."


class LegalHold(AirlockError):
    code, status, default_message = "LEGAL_HOLD", 409, "The file is under a legal hold: it cannot be deleted."


class AlreadyUploaded(AirlockError):
    code, status, default_message = "ALREADY_UPLOADED", 409, "Bytes were already uploaded for this intent."


class TooLarge(AirlockError):
    code, status, default_message = "TOO_LARGE", 413, "The upload is larger than the profile allows."


class QuotaExceeded(AirlockError):
    code, status, default_message = "QUOTA_EXCEEDED", 413, "The tenant's quota would be exceeded."


class LinkGone(AirlockError):
    code, status, default_message = "LINK_GONE", 410, "This upload link has expired or was disabled."


class AttachmentInvalid(AirlockError):
    code, status, default_message = "ATTACHMENT_INVALID", 422, "Some attachments cannot be committed."


class RateLimited(AirlockError):
    code, status, default_message = "RATE_LIMITED", 429, "Too many requests."


class Unavailable(AirlockError):
    code, status, default_message = "UNAVAILABLE", 503, "A dependency is unavailable."


class BodyChecksumMismatch(AirlockError):
    # The tus PATCH answers the same code with tus's own 460 (attachments/uploads/services/tus.py).
    code, status, default_message = "CHECKSUM_MISMATCH", 400, "The body does not match the declared sha256."
