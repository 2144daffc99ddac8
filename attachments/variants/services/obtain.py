"""Make a named variant once, however many requests ask for it at the same moment.

Single flight across processes and hosts: the request that inserts the
VariantClaim row (a unique insert; one wins on PostgreSQL and SQLite alike)
makes the variant in the sandbox, stores it under the derivative prefix and
records the Derivative row; every other request polls for that row up to
WAIT_SECONDS, then answers 503 + Retry-After. A failed generation leaves the
claim marked failed for FAILURE_SECONDS:
requests in that window get 503 at once, nobody retries the decode. A claim
whose maker died (past the sandbox's wall time) is taken over.

Bounded work: the maker makes it only within AIRLOCK_CONCURRENCY.variants_at_once
generations in this process and one of its tenant's fair-share slots (the
pipeline's, hooks.variant_slot); when either is full it drops its claim and
answers 503 VARIANT_BUSY + Retry-After at once: a browser retries, and neither
this process's other requests nor other tenants wait behind a flood.
"""

from __future__ import annotations

import logging
import math
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from prometheus_client import Counter

from ... import hooks
from ...errors import NotFound, Unavailable
from ...models import Attachment, Derivative, VariantClaim
from ...naming import derivative_key
from ...selectors import servable_now
from ...services.connections import give_connection_back
from ...serving import served_object
from ...storage import get_gateway
from ...storage.base import StorageError
from ..spec import FORMATS, page_kind, variant_kind, variant_sizes
from .purge import forget_stored_object

log = logging.getLogger("airlock.variants")

POLL_SECONDS = 0.1
# A request for a variant another request is making waits this long for it, then 503:
# a cold variant of a large photo takes a few seconds; a browser retries after half of it.
WAIT_SECONDS = 10.0
# A failed generation is answered 503 from memory this long before anyone tries again.
FAILURE_SECONDS = 60
# The console's PDF preview: the first pages of a document, long edge in px, made on first view.
CONSOLE_PDF_PAGES = 3
CONSOLE_PAGE_SIZE = 480
# A maker's claim outlives the sandbox's own deadline by this much before another takes it over.
CLAIM_GRACE_SECONDS = 30

# A refused generation's Retry-After: about one cold variant of a large photo.
BUSY_RETRY_SECONDS = 2

# made, failed (remembered for FAILURE_SECONDS), unavailable (sandbox or
# storage outage), waited_out (gave up waiting for another request's generation),
# busy (refused: this process's limit or the tenant's slots were full).
GENERATIONS = Counter("airlock_variant_generations_total", "Named variant generations by outcome.", ["outcome"])


class VariantFailed(Unavailable):
    code, default_message = "VARIANT_FAILED", "This variant could not be made; it is not retried before Retry-After."


class VariantBusy(Unavailable):
    code, default_message = "VARIANT_BUSY", "Too many variants are being made right now; retry after Retry-After."


def _retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def _busy(limit: str) -> VariantBusy:
    return VariantBusy(details={"limit": limit}, headers=_retry_after(BUSY_RETRY_SECONDS))


class _ProcessLimit:
    """Generations running in this process, at most AIRLOCK_CONCURRENCY.variants_at_once (read at each admission)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self.running >= settings.AIRLOCK_CONCURRENCY.variants_at_once:
                raise _busy("process")
            self.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1


_PROCESS_LIMIT = _ProcessLimit()


@contextmanager
def _admitted(attachment: Attachment) -> Iterator[None]:
    """A place in this process's limit and one of the tenant's slots for one generation, or VariantBusy."""
    with _PROCESS_LIMIT.held(), ExitStack() as held:
        try:
            held.enter_context(hooks.variant_slot(str(attachment.tenant_id), str(attachment.pk)))
        except hooks.SlotsFull as exc:
            raise _busy("tenant") from exc
        yield


def _claim(attachment: Attachment, kind: str, now: datetime) -> VariantClaim | None:
    """None when this request now owns the claim; else the claim another request holds.

    When that claim is gone by the time it is read (its maker just finished), an unsaved
    stand-in comes back: neither failed nor ours, so the caller looks for the row again.
    """
    until = now + timedelta(seconds=settings.AIRLOCK_SANDBOX_LIMITS.wall_seconds + CLAIM_GRACE_SECONDS)
    try:
        with transaction.atomic():
            VariantClaim.objects.create(attachment=attachment, kind=kind, until=until)
        return None
    except IntegrityError:
        pass
    # A stale claim (its maker died) or a failure whose window passed: one conditional
    # update wins, as the insert would have.
    if VariantClaim.objects.filter(attachment=attachment, kind=kind, until__lte=now).update(failed=False, until=until):
        return None
    return VariantClaim.objects.filter(attachment=attachment, kind=kind).first() or VariantClaim(
        attachment=attachment, kind=kind, until=now
    )  # just released: the caller looks again


def _generate(attachment: Attachment, *, name: str, fmt: str, kind: str, edge: int, page: int) -> Derivative:
    served = served_object(attachment)
    if served is None:
        raise NotFound()
    source_key, source_size = served
    content_type, ext = FORMATS[fmt]
    gateway = get_gateway()
    render = hooks.variant_renderer()
    give_connection_back()  # none held through the download and the sandbox job (seconds)
    with tempfile.TemporaryDirectory(prefix="airlock-variant-", dir=gateway.scratch_dir()) as tmp:
        # Local storage hands the sandbox the stored file itself, as derive does (the server
        # opens it for the job): no copy of a 12 MP photo per cold variant.
        source = gateway.local_path(source_key)
        if source is None:
            source = Path(tmp) / "source"
            gateway.download_to(source_key, source, max_bytes=source_size)
        work = Path(tmp) / "work"
        made = render(source, work, edge, fmt, page=page) if page else render(source, work, edge, fmt)
        key = derivative_key(
            tenant_slug=attachment.tenant.slug, attachment_id=attachment.pk, kind=f"variant-{name}", ext=ext
        )
        size = gateway.move_file_in(key, made.path, content_type=content_type)
    with transaction.atomic():
        # The file may have been taken down, rescanned or deleted while the sandbox ran (which
        # dropped the variants it had): record this one only for the same file, still served.
        current = (
            Attachment.objects.select_for_update()
            .only("status", "lifecycle", "expires_at", "served_key")
            .filter(pk=attachment.pk)
            .first()
        )
        if current is not None and servable_now(current) and current.served_key == attachment.served_key:
            derivative, _ = Derivative.objects.get_or_create(
                attachment=attachment,
                kind=kind,
                defaults={
                    "storage_key": key,
                    "content_type": content_type,
                    "size": size,
                    "width": made.width,
                    "height": made.height,
                },
            )
            return derivative
    log.info(
        "variant made for a file no longer served: not kept", extra={"attachment_id": str(attachment.pk), "kind": kind}
    )
    forget_stored_object(key)
    raise NotFound()


_STORED_SQL = (
    "SELECT id, storage_key, content_type, size, width, height FROM {table} WHERE attachment_id = %s AND kind = %s"
)


def stored_variant(attachment_id: uuid.UUID, kind: str) -> Derivative | None:
    """The recorded variant, or None: every warm request asks this, so one plain SELECT on the unique key.

    Building the same query through the ORM would cost about as much as the whole
    download's own work on SQLite.
    """
    field = Derivative._meta.get_field("attachment")
    with connection.cursor() as cursor:
        cursor.execute(
            _STORED_SQL.format(table=connection.ops.quote_name(Derivative._meta.db_table)),
            [field.get_db_prep_value(attachment_id, connection), kind],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    pk, storage_key, content_type, size, width, height = row
    return Derivative(
        pk=pk,
        attachment_id=attachment_id,
        kind=kind,
        storage_key=storage_key,
        content_type=content_type,
        size=size,
        width=width,
        height=height,
    )


def variant_obtain(
    *, attachment: Attachment, name: str, fmt: str, clock: Callable[[], datetime] = timezone.now
) -> Derivative:
    """The stored variant `name` in `fmt` of a ready attachment, made now if no one has made it yet."""
    if name not in variant_sizes(attachment.profile, attachment.content_type) or fmt not in FORMATS:
        raise NotFound()
    return _obtain(
        attachment,
        kind=variant_kind(name, fmt),
        name=name,
        fmt=fmt,
        size=variant_sizes(attachment.profile, attachment.content_type)[name],
        page=0,
        clock=clock,
    )


def page_preview_obtain(
    *, attachment: Attachment, page: int, clock: Callable[[], datetime] = timezone.now
) -> Derivative:
    """Page `page` (1-based) of a PDF, small, for the console's page previews: made once, as a variant is.

    Only the first CONSOLE_PDF_PAGES pages of a document processing counted;
    the caller gates who may see it (the admin's staff preview rule).
    """
    pages = (attachment.metadata or {}).get("page_count") or 0
    shown = min(pages, CONSOLE_PDF_PAGES)
    if attachment.content_type != "application/pdf" or not 1 <= page <= shown:
        raise NotFound()
    return _obtain(
        attachment,
        kind=page_kind(page),
        name=f"page-{page}",
        fmt="webp",
        size=CONSOLE_PAGE_SIZE,
        page=page,
        clock=clock,
    )


def _obtain(
    attachment: Attachment, *, kind: str, name: str, fmt: str, size: int, page: int, clock: Callable[[], datetime]
) -> Derivative:
    give_up = time.monotonic() + WAIT_SECONDS
    while True:
        found = stored_variant(attachment.pk, kind)
        if found is not None:
            return found
        now = clock()
        held = _claim(attachment, kind, now)
        if held is None:
            # The maker before us records the row, then drops its claim: a claim won after
            # our first look may follow a generation that just finished. Look once more.
            found = Derivative.objects.filter(attachment=attachment, kind=kind).first()
            if found is not None:
                VariantClaim.objects.filter(attachment=attachment, kind=kind).delete()
                return found
            return _make(attachment, name=name, fmt=fmt, kind=kind, size=size, page=page, clock=clock)
        if held.failed:
            raise VariantFailed(headers=_retry_after((held.until - now).total_seconds()))
        if time.monotonic() >= give_up:
            GENERATIONS.labels(outcome="waited_out").inc()
            raise Unavailable(
                "This variant is being made; try again shortly.",
                headers=_retry_after(WAIT_SECONDS / 2),
            )
        give_connection_back()  # a waiter holds no pooled connection between polls
        time.sleep(POLL_SECONDS)


def _make(
    attachment: Attachment, *, name: str, fmt: str, kind: str, size: int, page: int, clock: Callable[[], datetime]
) -> Derivative:
    claim = VariantClaim.objects.filter(attachment=attachment, kind=kind)
    try:
        with _admitted(attachment):
            derivative = _generate(attachment, name=name, fmt=fmt, kind=kind, edge=size, page=page)
    except VariantBusy:
        claim.delete()  # refused before any work: the next request (this one retried) claims it afresh
        GENERATIONS.labels(outcome="busy").inc()
        raise
    except hooks.RenderFailed as exc:
        GENERATIONS.labels(outcome="failed").inc()
        log.warning("variant failed", extra={"attachment_id": str(attachment.pk), "kind": kind, "error": str(exc)})
        window = FAILURE_SECONDS
        claim.update(failed=True, until=clock() + timedelta(seconds=window))
        raise VariantFailed(headers=_retry_after(window)) from exc
    except BaseException as exc:
        # An outage (sandbox, storage) or anything unforeseen: release the claim so the next request tries again.
        claim.delete()
        if isinstance(exc, hooks.RenderUnavailable | StorageError):
            GENERATIONS.labels(outcome="unavailable").inc()
            raise Unavailable(
                "The sandbox or storage is unavailable; try again shortly.", headers=_retry_after(5)
            ) from exc
        raise
    claim.delete()
    GENERATIONS.labels(outcome="made").inc()
    log.info("variant made", extra={"attachment_id": str(attachment.pk), "kind": kind, "size": derivative.size})
    return derivative
