"""A client token's grant, checked where the token is used: profiles at intent, the ref at commit, the budget.

Lower than client_tokens.py (minting, revoking, logout), so the intent and lifecycle services
(attachments/services/) can use it.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import F
from django.db.models.functions import Greatest

from ...errors import NotAuthenticated, OutOfScope, QuotaExceeded
from ...models import ClientToken


def client_token_check_profile(token: ClientToken, profile: str) -> None:
    if token.profiles and profile not in token.profiles:
        raise OutOfScope(
            f"This client token may not upload to profile {profile!r}.",
            details={"profile": [f"Allowed: {', '.join(token.profiles)}."]},
        )


def client_token_check_commit(token: ClientToken, *, ref: str, replace: bool) -> None:
    if token.ref is None:
        raise OutOfScope("This client token may not commit.", details={"ref": ["No ref was granted."]})
    if ref != token.ref:
        raise OutOfScope("This client token may not commit to this ref.", details={"ref": ["Not the granted ref."]})
    if replace:
        # replace releases the ref's other files; releasing stays the host's.
        raise OutOfScope("A client token may not commit with `replace`.", details={"replace": ["Not allowed."]})


def client_token_reserve(token: ClientToken, *, size: int, now: datetime) -> None:
    """Take one file of `size` declared bytes from the token's budget (inside the intent's transaction)."""
    if token.max_files is None and token.max_bytes is None:
        return  # nothing to count: no statement
    rows = ClientToken.objects.filter(pk=token.pk, revoked_at__isnull=True, expires_at__gt=now)
    if token.max_files is not None:
        rows = rows.filter(files_used__lte=F("max_files") - 1)
    if token.max_bytes is not None:
        rows = rows.filter(bytes_used__lte=F("max_bytes") - size)
    if rows.update(files_used=F("files_used") + 1, bytes_used=F("bytes_used") + size):
        return
    # Refused: say which limit, as the tenant's quota does (a refusal costs a read; a success does not).
    files_used, bytes_used = ClientToken.objects.filter(pk=token.pk).values_list("files_used", "bytes_used").get()
    if token.max_files is not None and files_used + 1 > token.max_files:
        raise QuotaExceeded(
            f"The client token has created {files_used} of its {token.max_files} files.",
            details={"quota": "client_token_files", "used": files_used, "limit": token.max_files, "requested": 1},
        )
    if token.max_bytes is not None and bytes_used + size > token.max_bytes:
        raise QuotaExceeded(
            f"{size} more bytes would pass the client token's {token.max_bytes} bytes ({bytes_used} used).",
            details={"quota": "client_token_bytes", "used": bytes_used, "limit": token.max_bytes, "requested": size},
        )
    raise NotAuthenticated("The client token was revoked or has expired.")


def client_token_give_back(token: ClientToken, *, size: int) -> None:
    """Give back what client_token_reserve took for an upload refused before it was kept (no row is left).

    Only for that: an upload the token did create (discarded since, or removed)
    keeps counting. Nothing was counted without a limit, so nothing is given back.
    """
    if token.max_files is None and token.max_bytes is None:
        return
    ClientToken.objects.filter(pk=token.pk).update(
        files_used=Greatest(F("files_used") - 1, 0), bytes_used=Greatest(F("bytes_used") - size, 0)
    )
