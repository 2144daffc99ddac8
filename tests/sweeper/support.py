"""Helpers for lifecycle and sweeper tests: rows built with the ORM, files in storage, gateways that count."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from attachments.models import Attachment, Derivative, Lifecycle, Status
from attachments.naming import derivative_key, original_key, quarantine_key
from attachments.storage import get_gateway
from attachments.storage.base import ObjectInfo, StorageError, StorageGateway

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def require_live_services(request: pytest.FixtureRequest) -> None:
    """Tests marked postgres/redis FAIL (never skip) when the service is not there: CI provides them."""
    if request.node.get_closest_marker("postgres") and connection.vendor != "postgresql":
        pytest.fail("marked postgres but DATABASE_URL is not PostgreSQL (set DATABASE_URL=postgres://…)")
    if request.node.get_closest_marker("redis"):
        if not settings.REDIS_URL:
            pytest.fail("marked redis but REDIS_URL is not set")
        import redis

        try:
            redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3).ping()
        except redis.RedisError as exc:
            pytest.fail(f"marked redis but Redis at {settings.REDIS_URL} does not answer: {exc}")


@pytest.fixture(autouse=True)
def live_services_and_clean_locks(request: pytest.FixtureRequest) -> None:
    """For conftests of tests that sweep: marked services present, no lock left by an earlier test."""
    require_live_services(request)
    clear_redis_locks()


@pytest.fixture(autouse=True)
def no_brake_overrides(settings) -> None:
    """The environment may pin the brakes; tests start from the database's word."""
    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None


def make_attachment(
    owner,
    *,
    created_at: datetime = T0,
    lifecycle: str = Lifecycle.STAGED,
    status: str = Status.READY,
    expires_at: datetime | None | str = "default",
    profile: str = "image",
    files: bool = True,
    thumbnail: bool = True,
    served: bool = True,
    quarantined: bool = False,
    **fields,
) -> Attachment:
    """A row as the pipeline leaves it, with its objects in storage (unless files=False)."""
    tenant = owner.membership.tenant
    pk = uuid.uuid4()
    key = original_key(tenant_slug=tenant.slug, profile=profile, attachment_id=pk)
    served_key = (
        derivative_key(tenant_slug=tenant.slug, attachment_id=pk, kind="sanitized", ext="jpg") if served else ""
    )
    if expires_at == "default":
        expires_at = (
            None
            if lifecycle == Lifecycle.COMMITTED
            else created_at + timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.staged_ttl)
        )
    fields.setdefault("uploaded_at", created_at)
    if status == Status.READY:
        fields.setdefault("size", 4)  # processing records the served copy's size with its key
    attachment = Attachment.objects.create(
        id=pk,
        tenant=tenant,
        owner=owner,
        profile=profile,
        status=status,
        filename="cat.jpg",
        declared_size=4,
        declared_type="image/jpeg",
        storage_key=key,
        served_key=served_key,
        quarantine_key=quarantine_key(key) if quarantined else "",
        created_at=created_at,
        lifecycle=lifecycle,
        expires_at=expires_at,
        committed_at=created_at if lifecycle == Lifecycle.COMMITTED else None,
        ref="test:1" if lifecycle == Lifecycle.COMMITTED else None,
        discarded_at=created_at if lifecycle == Lifecycle.DISCARDED else None,
        **fields,
    )
    keys = [key] if not quarantined else [quarantine_key(key)]
    if served_key:
        keys.append(served_key)
    if thumbnail:
        thumb = derivative_key(tenant_slug=tenant.slug, attachment_id=pk, kind="thumbnail", ext="webp")
        Derivative.objects.create(
            attachment=attachment,
            kind="thumbnail",
            storage_key=thumb,
            content_type="image/webp",
            size=4,
            width=4,
            height=3,
        )
        keys.append(thumb)
    if files:
        gateway = get_gateway()
        for k in keys:
            gateway.write_chunks(k, [b"data"])
    return attachment


def all_keys(attachment: Attachment) -> list[str]:
    """Every key the row stores (the ones the sweeper must delete)."""
    keys = [k for k in (attachment.storage_key, attachment.served_key, attachment.quarantine_key) if k]
    keys += list(Derivative.objects.filter(attachment=attachment).values_list("storage_key", flat=True))
    return keys


def existing(keys: Iterable[str]) -> set[str]:
    gateway = get_gateway()
    return {k for k in keys if gateway.head(k) is not None}


def files_of(attachment: Attachment) -> set[str]:
    return existing(all_keys(attachment))


def storage_snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class CountingGateway:
    """Wraps a gateway: counts deletes per key; can fail chosen keys; can run a hook on each delete."""

    name = "counting"

    def __init__(
        self,
        inner: StorageGateway | None = None,
        *,
        fail: Iterable[str] = (),
        on_delete: Callable[[str], None] | None = None,
    ) -> None:
        self.inner = inner or get_gateway()
        self.fail = set(fail)
        self.on_delete = on_delete
        self.calls: Counter[str] = Counter()
        self.removed: Counter[str] = Counter()
        self._lock = threading.Lock()

    def delete(self, key: str) -> bool:
        with self._lock:
            self.calls[key] += 1
        if self.on_delete is not None:
            self.on_delete(key)
        if key in self.fail:
            raise StorageError(f"injected failure for {key}")
        removed = self.inner.delete(key)
        if removed:
            with self._lock:
                self.removed[key] += 1
        return removed

    def head(self, key: str) -> ObjectInfo | None:
        return self.inner.head(key)

    def list_prefix(self, prefix: str) -> Iterator[ObjectInfo]:
        return self.inner.list_prefix(prefix)

    def copy(self, src: str, dst: str) -> None:
        self.inner.copy(src, dst)

    def write_chunks(self, key: str, chunks: Iterable[bytes], *, content_type: str = "") -> int:
        return self.inner.write_chunks(key, chunks, content_type=content_type)


def clear_redis_locks() -> None:
    """Locks live in Redis when REDIS_URL is set: a test never inherits one from another test."""
    if not settings.REDIS_URL:
        return
    import redis

    from sweeper.locks import redis_lock_key

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3)
    try:
        for key in client.scan_iter(redis_lock_key("*")):  # this run's locks only
            client.delete(key)
    except redis.RedisError:
        pass  # a redis-marked test fails on its own; others use the database
