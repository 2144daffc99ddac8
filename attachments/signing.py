"""Single-use upload URLs: a signed, expiring token naming one intent.

The signature proves the server issued it for that intent and when; "single
use" is enforced by the row (uploaded_at), so a refused attempt does not use
the URL up.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core import signing

_SALT = "airlock.upload-content"


def upload_token(attachment_id: uuid.UUID) -> str:
    return signing.TimestampSigner(salt=_SALT).sign(str(attachment_id))


def upload_token_valid(token: object, attachment_id: uuid.UUID) -> bool:
    if not isinstance(token, str) or len(token) > 200:
        return False
    try:
        value = signing.TimestampSigner(salt=_SALT).unsign(token, max_age=settings.AIRLOCK_UPLOAD_URL_SECONDS)
    except signing.BadSignature:  # includes SignatureExpired
        return False
    return value == str(attachment_id)
