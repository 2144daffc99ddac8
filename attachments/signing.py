"""Signed URLs, both made with django.core.signing: single-use upload URLs and expiring delivery URLs.

Upload URLs: a signed, expiring token naming one intent. The signature proves
the server issued it for that intent and when; "single use" is enforced by the
row (uploaded_at), so a refused attempt does not use the URL up.

Delivery URLs (docs/api.md, "Signed links"): `?exp=…&kid=…&sig=…` on a file
link, so that an `<img src>` that can send no header may read it. The
signature binds the tenant, the attachment, the rendition name (`download`,
`thumbnail`, any variant) and the expiry; `kid` names the key, so a rotated
secret refuses its URLs at once (or accepts them until they expire, when it is
listed as a previous secret). A valid signature is only a credential: the
gate (status, lifecycle) is checked at every read by the selector.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
import uuid
from urllib.parse import quote

from django.conf import settings
from django.core import signing
from django.utils.crypto import constant_time_compare, salted_hmac

from .errors import SignatureInvalid, UrlExpired

_SALT = "airlock.upload-content"


def upload_token(attachment_id: uuid.UUID) -> str:
    return signing.TimestampSigner(salt=_SALT).sign(str(attachment_id))


def upload_token_valid(token: object, attachment_id: uuid.UUID) -> bool:
    if not isinstance(token, str) or len(token) > 200:
        return False
    try:
        value = signing.TimestampSigner(salt=_SALT).unsign(token, max_age=settings.AIRLOCK_URL_SECONDS.upload)
    except signing.BadSignature:  # includes SignatureExpired
        return False
    return value == str(attachment_id)


# --- delivery URLs ------------------------------------------------------------------------

# The purpose string: with the SECRET_KEY default, it is what makes the delivery key
# a key of its own (django.core.signing derives the HMAC key from salt + secret).
DELIVERY_SALT = "airlock.delivery-url"
# Expiries are rounded up to this step, so every read of a resource within it mints the
# same link (stable for the browser and for `srcset`); a link lives between
# AIRLOCK_URL_SECONDS.delivery and that plus one step.
EXPIRY_STEP_SECONDS = 300
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_KID = re.compile(r"^[0-9a-f]{8}$")
_SIG = re.compile(r"^[A-Za-z0-9_-]{20,100}$")


@functools.lru_cache(maxsize=16)
def key_id(key: str) -> str:
    """A short public name for a key: an HMAC of it, so it reveals nothing of the key."""
    return salted_hmac(DELIVERY_SALT + ".kid", "v1", secret=key, algorithm="sha256").hexdigest()[:8]


def _current_key() -> str:
    return settings.AIRLOCK_DELIVERY_URL_SECRET or settings.SECRET_KEY


def _accepted_keys() -> dict[str, str]:
    """kid → key for every key whose URLs are still accepted: the current one first."""
    keys: list[str] = [_current_key(), *settings.AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS]
    if not settings.AIRLOCK_DELIVERY_URL_SECRET:
        # Derived from SECRET_KEY: it rotates with it, and honours its fallbacks.
        keys += [str(key) for key in settings.SECRET_KEY_FALLBACKS]
    accepted: dict[str, str] = {}
    for key in keys:
        accepted.setdefault(key_id(key), key)
    return accepted


@functools.lru_cache(maxsize=16)
def _signer(key: str) -> signing.Signer:
    # Built once per key: building one costs about as much as signing (a resource signs
    # every file link it shows); a Signer holds no per-call state, so threads share it.
    return signing.Signer(key=key, salt=DELIVERY_SALT)


def _signature(key: str, *, tenant_id: object, attachment_id: object, name: str, exp: str, guest: str = "") -> str:
    message = f"v1:{tenant_id}:{attachment_id}:{name}:{exp}"
    # A link minted for the guest of a file still waiting for approval names that guest: only such a
    # link reads it full size. `exp` is digits, so no tenant-wide message ends in `:<guest>`.
    return _signer(key).signature(f"{message}:{guest}" if guest else message)


def _step() -> int:
    return max(1, min(EXPIRY_STEP_SECONDS, settings.AIRLOCK_URL_SECONDS.delivery))


def _now() -> float:
    return time.time()


def delivery_expiry(now: float | None = None) -> int:
    """Unix seconds a link minted at `now` expires: the lifetime from now, rounded up to the step."""
    now = _now() if now is None else now
    step = _step()
    return -(-int(now + settings.AIRLOCK_URL_SECONDS.delivery) // step) * step


def delivery_query(*, tenant_id: object, attachment_id: object, name: str, exp: int, guest: str = "") -> str:
    """The query string (`exp=…&kid=…&sig=…`) that lets `name` of this attachment be read until `exp`.

    guest: the subject of the guest a file waiting for approval is shown to (the link reads it full size).
    """
    if not _NAME.match(name):
        raise ValueError(f"not a rendition name: {name!r}")
    key = _current_key()
    sig = _signature(key, tenant_id=tenant_id, attachment_id=attachment_id, name=name, exp=str(exp), guest=guest)
    return f"exp={exp}&kid={key_id(key)}&sig={sig}"


def delivery_signed(query: object) -> bool:
    """Whether a request's query parameters try the signed-URL credential (its `sig`)."""
    return "sig" in query  # type: ignore[operator]


def delivery_check(
    *,
    tenant_id: object,
    attachment_id: object,
    name: str,
    exp: object,
    kid: object,
    sig: object,
    now: float | None = None,
    guest: str = "",
) -> bool:
    """Raise SignatureInvalid or UrlExpired unless the signature is ours, for this very link, and current.

    True when it is the link minted for `guest` (given for a file waiting for approval), False for the tenant's.
    """
    if not (
        isinstance(exp, str)
        and exp.isascii()
        and exp.isdigit()
        and len(exp) <= 12
        and isinstance(kid, str)
        and _KID.match(kid)
        and isinstance(sig, str)
        and _SIG.match(sig)
    ):
        raise SignatureInvalid("The signed URL is malformed: it needs `exp`, `kid` and `sig` as issued.")
    key = _accepted_keys().get(kid)
    if key is None:
        raise SignatureInvalid("The signed URL was signed with a key that is no longer accepted.")
    expected = _signature(key, tenant_id=tenant_id, attachment_id=attachment_id, name=name, exp=exp)
    for_guest = False
    if not constant_time_compare(expected, sig):
        bound = guest and _signature(
            key, tenant_id=tenant_id, attachment_id=attachment_id, name=name, exp=exp, guest=guest
        )
        if not (bound and constant_time_compare(bound, sig)):
            raise SignatureInvalid()
        for_guest = True
    now = _now() if now is None else now
    if int(exp) <= now:
        raise UrlExpired()
    if int(exp) > now + settings.AIRLOCK_URL_SECONDS.delivery + _step():
        # Minted under a longer lifetime than the one configured now: shortening the
        # setting (after a leak, say) shortens the links already out there too.
        raise UrlExpired(
            "The signed URL outlives the current AIRLOCK_URL_SECONDS delivery lifetime; "
            "read the resource for a fresh link."
        )
    return for_guest


# --- a ref's archive ----------------------------------------------------------------------
# Signed like a file link, with the ref (and the subject a confined caller minted it for) in
# place of the attachment id: a digest, so no ref can spell another link's message.
ARCHIVE_NAME = "archive"


def _archive_target(ref: str, scope: str) -> str:
    return "ref-" + hashlib.sha256(f"{ref}\0{scope}".encode()).hexdigest()


def archive_query(*, tenant_id: object, tenant_slug: str, ref: str, scope: str, exp: int) -> str:
    """The query string of a signed archive link: the tenant, the scope when there is one, exp/kid/sig."""
    signed = delivery_query(tenant_id=tenant_id, attachment_id=_archive_target(ref, scope), name=ARCHIVE_NAME, exp=exp)
    return f"t={quote(tenant_slug)}" + (f"&scope={quote(scope, safe='')}" if scope else "") + f"&{signed}"


def archive_check(
    *, tenant_id: object, ref: str, scope: str, exp: object, kid: object, sig: object, now: float | None = None
) -> None:
    """Raise SignatureInvalid or UrlExpired unless this is a current archive link for this ref and scope."""
    delivery_check(
        tenant_id=tenant_id,
        attachment_id=_archive_target(ref, scope),
        name=ARCHIVE_NAME,
        exp=exp,
        kid=kid,
        sig=sig,
        now=now,
    )
