"""API tokens: issued once (the caller shows the key), stored only as a digest."""

from __future__ import annotations

import hashlib
import secrets

from ..models import ApiToken


def token_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def api_token_issue(*, user) -> str:
    """A new key for `user`; the key itself is returned once and never stored."""
    key = secrets.token_hex(20)  # 40 hex characters, the shape clients already know
    ApiToken.objects.create(user=user, digest=token_digest(key), prefix=key[:8])
    return key


def api_token_find(key: str) -> ApiToken | None:
    """The token row (with its user and tenant: every API request needs all three), or None."""
    # get(), not filter().first(): the digest is unique, and first()'s ORDER BY
    # would be compiled on every API request.
    try:
        return ApiToken.objects.select_related("user__membership__tenant").get(digest=token_digest(key))
    except ApiToken.DoesNotExist:
        return None
