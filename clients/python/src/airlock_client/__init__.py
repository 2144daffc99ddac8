"""Airlock's Python client: `Client(base_url, token)` and `verify_webhook(headers, body, secret)`."""

from .client import Client
from .errors import (
    AirlockError,
    AlreadyCommitted,
    AlreadyUploaded,
    AttachmentInvalid,
    ChecksumMismatch,
    Conflict,
    DownloadMismatch,
    InternalError,
    NotAuthenticated,
    NotFound,
    NotRestorable,
    OffsetMismatch,
    QuotaExceeded,
    RateLimited,
    RequestTimeout,
    Retryable,
    ServiceUnavailable,
    StorageError,
    TooLarge,
    TransportError,
    TypeNotAllowed,
    UnknownProfile,
    UploadExpired,
    UploadInterrupted,
    UploadLocked,
    UploadNotInProgress,
    UploadTokenInvalid,
    ValidationError,
    WaitTimeout,
    WebhookVerificationError,
)
from .types import Attachment, Commit, Heartbeat, ProgressCallback, Usage
from .webhooks import verify_webhook

__all__ = [
    "AirlockError", "AlreadyCommitted", "AlreadyUploaded", "Attachment", "AttachmentInvalid", "ChecksumMismatch",
    "Client", "Commit", "Conflict", "DownloadMismatch", "Heartbeat", "InternalError", "NotAuthenticated",
    "NotFound", "NotRestorable", "OffsetMismatch", "ProgressCallback", "QuotaExceeded", "RateLimited",
    "RequestTimeout", "Retryable", "ServiceUnavailable", "StorageError", "TooLarge", "TransportError",
    "TypeNotAllowed", "UnknownProfile", "UploadExpired", "UploadInterrupted", "UploadLocked",
    "UploadNotInProgress", "UploadTokenInvalid", "Usage", "ValidationError", "WaitTimeout",
    "WebhookVerificationError", "verify_webhook",
]
