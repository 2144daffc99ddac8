"""Per-user limits on intents: a rate per minute and a cap on outstanding uploads."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.cache import cache

from ..errors import RateLimited
from ..models import Attachment


def pending_at_limit(*, user, now: datetime, limit: int) -> bool:
    """Whether the user already has `limit` outstanding uploads (`Attachment.objects.outstanding_uploads`)."""
    if limit <= 0:
        return True
    # "Is there a limit-th row?" rather than COUNT(*): the database stops at the
    # limit, so a huge backlog costs no more than one at the cap.
    return Attachment.objects.outstanding_uploads(owner=user, now=now)[limit - 1 : limit].exists()


def check_intent_rate(*, user, now: datetime) -> None:
    window = int(now.timestamp() // 60)
    key = f"airlock:intents:{user.pk}:{window}"
    # add() then incr() is atomic on Redis and on the local-memory cache.
    cache.add(key, 0, timeout=120)
    try:
        count = cache.incr(key)
    except ValueError:
        cache.set(key, 1, timeout=120)
        count = 1
    if count > settings.AIRLOCK_INTENTS_PER_MINUTE:
        retry_after = max(1, 60 - int(now.timestamp()) % 60)
        raise RateLimited(
            "Too many upload intents; slow down.",
            details={"limit": settings.AIRLOCK_INTENTS_PER_MINUTE, "window_seconds": 60},
            headers={"Retry-After": str(retry_after)},
        )
    if pending_at_limit(user=user, now=now, limit=settings.AIRLOCK_MAX_PENDING_PER_USER):
        raise RateLimited(
            "Too many pending uploads; finish or discard some first.",
            details={"limit": settings.AIRLOCK_MAX_PENDING_PER_USER},
            headers={"Retry-After": "60"},
        )
