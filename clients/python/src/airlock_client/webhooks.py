"""Verifying Airlock's webhooks: Standard Webhooks 1.0.0, symmetric `v1` signatures (HMAC-SHA256)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import WebhookVerificationError

PREFIX = "whsec_"
TOLERANCE_SECONDS = 300  # the reference libraries' window: 5 minutes either way


def verify_webhook(
    headers: Mapping[str, str],
    body: bytes | str,
    secret: str | Iterable[str],
    *,
    tolerance: float = TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """The event, once its signature verifies with one of the secrets; WebhookVerificationError otherwise.

    `headers` may be any mapping (Django's `request.headers`, a dict with any
    case); `body` must be the raw bytes as received. Several secrets may be given
    while one is being rotated. Deduplicate on `headers["webhook-id"]`: delivery
    is at least once.
    """
    lowered = {str(name).lower(): value for name, value in headers.items()}
    msg_id, stamp, signatures = (lowered.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and stamp and signatures):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    current = time.time() if now is None else now
    if timestamp < current - tolerance:
        raise WebhookVerificationError("the webhook's timestamp is too old")
    if timestamp > current + tolerance:
        raise WebhookVerificationError("the webhook's timestamp is in the future")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    signed = f"{msg_id}.{timestamp}.".encode() + raw
    expected = [base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode() for key in _keys(secret)]
    for candidate in signatures.split():
        version, _, value = candidate.partition(",")
        if version == "v1" and any(hmac.compare_digest(value, mine) for mine in expected):
            try:
                event: dict[str, Any] = json.loads(raw)
            except ValueError:
                raise WebhookVerificationError("the body is not JSON") from None
            return event
    raise WebhookVerificationError("no signature matches the secret")


def _keys(secret: str | Iterable[str]) -> list[bytes]:
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets:
        raise ValueError("no webhook secret given")
    keys = []
    for value in secrets:
        encoded = value[len(PREFIX) :] if value.startswith(PREFIX) else value
        try:
            keys.append(base64.b64decode(encoded, validate=True))
        except (binascii.Error, ValueError):
            raise ValueError("a webhook secret is whsec_ followed by base64") from None
    return keys
