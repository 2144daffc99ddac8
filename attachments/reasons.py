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
    TOO_LARGE = "too_large"
    TYPE_NOT_ALLOWED = "type_not_allowed"
    MALWARE = "malware"
    PIXEL_LIMIT = "pixel_limit"
    PAGE_LIMIT = "page_limit"
    ARCHIVE_LIMIT = "archive_limit"
    DURATION_LIMIT = "duration_limit"
    CORRUPT = "corrupt"
    TIMEOUT = "timeout"
    OBJECT_MISSING = "object_missing"
    MODERATOR = "moderator"
    INFRASTRUCTURE = "infrastructure"
