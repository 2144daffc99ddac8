"""Standard Webhooks signatures (standardwebhooks.com, spec 1.0.0, symmetric scheme).

The signed content is `{webhook-id}.{webhook-timestamp}.{body}`; the key is the
base64-decoded secret after its `whsec_` prefix; the header value is `v1,` plus
the base64 HMAC-SHA256, one per secret, space-separated (a rotation sends two).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets as _secrets
from collections.abc import Iterable

PREFIX = "whsec_"
# The spec asks for 24 to 64 random bytes.
MIN_KEY_BYTES, MAX_KEY_BYTES = 24, 64


class InvalidSecret(ValueError):
    pass


def new_secret() -> str:
    return PREFIX + base64.b64encode(_secrets.token_bytes(32)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_…` secret; InvalidSecret when it is not one."""
    if not isinstance(secret, str) or not secret.startswith(PREFIX):
        raise InvalidSecret("a webhook secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidSecret("a webhook secret is whsec_ followed by base64") from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise InvalidSecret(f"a webhook secret holds {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes, not {len(key)}")
    return key


def signature(*, msg_id: str, timestamp: int, body: bytes, secrets: Iterable[str]) -> str:
    """The `webhook-signature` header value: one `v1,<base64>` per secret."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(secret_key(s), signed, hashlib.sha256).digest()).decode("ascii")
        for s in secrets
    )


def headers(*, msg_id: str, timestamp: int, body: bytes, secrets: Iterable[str]) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(msg_id=msg_id, timestamp=timestamp, body=body, secrets=secrets),
    }
