"""Per-subject limits on intents: a rate per minute and a cap on outstanding uploads.

The cap is checked where the row is inserted (uploads/services/intents.py): on PostgreSQL
inside the one statement that takes the room and inserts, elsewhere just before.

Per subject (the host's person, attachments/subjects.py), not per token: one
host's busy evening is many people's, each with their own allowance.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.conf import settings
from django.core.cache import cache
from django.db.models import QuerySet

from ..errors import RateLimited
from ..models import Attachment
from ..shared_redis import shared_redis
from ..subjects import subject_of
from ..tenancy import tenant_of


def limit_th_outstanding(*, tenant_id: int, subject: str, now: datetime, limit: int) -> QuerySet[Attachment]:
    """The subject's `limit`-th outstanding upload, if it has that many (`outstanding_uploads`).

    "Is there a limit-th row?" rather than COUNT(*): the database stops at the
    limit, so a huge backlog costs no more than one at the cap.
    """
    return Attachment.objects.outstanding_uploads(tenant_id=tenant_id, subject=subject, now=now)[limit - 1 : limit]


def pending_at_limit(*, tenant_id: int, subject: str, now: datetime, limit: int) -> bool:
    """Whether the subject already has `limit` outstanding uploads (one probe that stops at the limit-th row)."""
    if limit <= 0:
        return True
    return limit_th_outstanding(tenant_id=tenant_id, subject=subject, now=now, limit=limit).exists()


def refuse_at_pending_cap(*, tenant_id: int, subject: str, now: datetime) -> None:
    """429 when the subject has AIRLOCK_RATE_LIMITS.pending_per_subject intents whose bytes never came."""
    limit = settings.AIRLOCK_RATE_LIMITS.pending_per_subject
    if pending_at_limit(tenant_id=tenant_id, subject=subject, now=now, limit=limit):
        raise RateLimited(
            "Too many pending uploads; finish or discard some first.",
            details={"limit": limit},
            headers={"Retry-After": "60"},
        )


def intent_rate_key(*, user, now: datetime) -> str:
    """The cache key counting the request's subject's intents in `now`'s minute."""
    window = int(now.timestamp() // 60)
    # The subject id is the host's text: hashed, so any id makes a valid cache key.
    subject = hashlib.sha256(subject_of(user).encode()).hexdigest()[:32]
    return f"airlock:intents:{tenant_of(user).pk}:{subject}:{window}"


# INCR, and the window's expiry when it is the first: one round trip (the cache API's add, then incr, took three).
_COUNT_INTENT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


def _count_intent(key: str) -> int:
    """This minute's intents of the key's subject, this one included."""
    if settings.REDIS_URL:
        counter = shared_redis().register_script(_COUNT_INTENT)
        return int(counter(keys=[cache.make_and_validate_key(key)], args=[120]))
    # add() then incr() is atomic on the local-memory cache.
    cache.add(key, 0, timeout=120)
    try:
        return cache.incr(key)
    except ValueError:
        cache.set(key, 1, timeout=120)
        return 1


def check_intent_rate(*, user, now: datetime) -> None:
    """429 past AIRLOCK_RATE_LIMITS.intents_per_minute for the subject (the pending cap is taken with the row)."""
    count = _count_intent(intent_rate_key(user=user, now=now))
    if count > settings.AIRLOCK_RATE_LIMITS.intents_per_minute:
        retry_after = max(1, 60 - int(now.timestamp()) % 60)
        raise RateLimited(
            "Too many upload intents; slow down.",
            details={"limit": settings.AIRLOCK_RATE_LIMITS.intents_per_minute, "window_seconds": 60},
            headers={"Retry-After": str(retry_after)},
        )
