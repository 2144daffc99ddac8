"""Why an attachment was rejected or failed: the one list of reason codes.

docs/api.md ("Reason codes") documents each; tests/ops/test_api_doc.py checks
that it does, and that every code spelled as a literal is a member. Literals
remain only where Django cannot be imported: the steps and the sandbox, which
the fork server loads without Django (processing/steps/, processing/sandbox/).
The reject transition refuses a code that is not a member.
"""

from __future__ import annotations

from django.db import models


class ReasonCode(models.TextChoices):
    # Each label is the code itself: moderators read, filter and search by the documented code.
    TOO_LARGE = "too_large", "too_large"
    TYPE_NOT_ALLOWED = "type_not_allowed", "type_not_allowed"
    MALWARE = "malware", "malware"
    PIXEL_LIMIT = "pixel_limit", "pixel_limit"
    PAGE_LIMIT = "page_limit", "page_limit"
    ARCHIVE_LIMIT = "archive_limit", "archive_limit"
    ARCHIVE_UNINSPECTABLE = "archive_uninspectable", "archive_uninspectable"
    DURATION_LIMIT = "duration_limit", "duration_limit"
    STREAM_LIMIT = "stream_limit", "stream_limit"
    CODEC_NOT_ALLOWED = "codec_not_allowed", "codec_not_allowed"
    CORRUPT = "corrupt", "corrupt"
    TIMEOUT = "timeout", "timeout"
    OBJECT_MISSING = "object_missing", "object_missing"
    SIZE_MISMATCH = "size_mismatch", "size_mismatch"
    CHECKSUM_MISMATCH = "checksum_mismatch", "checksum_mismatch"
    DUPLICATE = "duplicate", "duplicate"
    MODERATOR = "moderator", "moderator"
    INFRASTRUCTURE = "infrastructure", "infrastructure"
