"""What the pipeline's bookkeeping costs per file, pinned so that a regression fails here.

bench/pipeline_overhead.py measures the worker's overhead against the bare
steps; most of it is the ORM building statements. These tests pin what keeps it
small: a fixed number of statements per step, narrow reads through the named
queryset methods (Attachment.objects.for_step(), .for_transition(), .for_upload():
a column a step reads that its read leaves out fails here at once), UPDATEs that
write only what a transition declares, the derive actor's single read (none at
all for a job it parks), and the derivative rows replaced by one upsert.
"""

from __future__ import annotations

import uuid
from collections import Counter
from contextlib import contextmanager

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django_fsm import ConcurrentTransition

from attachments.models import Attachment, Derivative
from attachments.services.transitions import apply_transition, lock_attachment
from processing import actors, pipeline, tenant_slots
from processing.tenant_slots import MemorySlots
from tests.support import jpeg_bytes, pdf_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

_TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


@contextmanager
def _statements(capture_on_commit):
    """The statements run inside the block, on-commit work (the outbox send) included."""
    found: list[str] = []
    with CaptureQueriesContext(connection) as ctx:
        with capture_on_commit(execute=True):
            yield found
    found.extend(
        q["sql"] for q in ctx.captured_queries if not q["sql"].lstrip().upper().startswith(_TRANSACTION_CONTROL)
    )


def _verbs(statements: list[str]) -> dict[str, int]:
    return dict(Counter(sql.lstrip().split(None, 1)[0].upper() for sql in statements))


def _selects_text(statements: list[str]) -> bool:
    return any(
        sql.lstrip().upper().startswith("SELECT") and '"attachments_attachment"."text"' in sql for sql in statements
    )


@pytest.fixture(autouse=True)
def deferred_loads_fail_fast(monkeypatch):
    """Reading a column a narrow read left out must fail here, at once.

    Left alone, Attachment loads the column on first touch with one more query
    per use (tests/pipeline/test_deferred_fields.py); here that means a column
    list to fix, so it fails loudly instead of quietly costing a query.
    """

    def refuse(self, *args, fields=None, **kwargs):
        raise AssertionError(f"{type(self).__name__}.{', '.join(fields or ['*'])} was read but not loaded")

    monkeypatch.setattr(Attachment, "refresh_from_db", refuse)


@pytest.fixture
def memory_slots(monkeypatch):
    slots = MemorySlots()
    monkeypatch.setattr(tenant_slots.backend, "value", slots)
    return slots


def _sent(actor_name: str, attachment_id: uuid.UUID) -> list[str]:
    """The arguments of the newest job the outbox holds for this actor and file."""
    from attachments.models import OutboxMessage

    message = OutboxMessage.objects.filter(actor_name=actor_name, args__0=str(attachment_id)).latest("pk")
    return message.args


def _through_the_steps(attachment_id: uuid.UUID, capture) -> dict[str, list[str]]:
    """intake (which runs the scan) and derive as their actors run them, with each one's statements."""
    seen: dict[str, list[str]] = {}
    args = _sent("intake", attachment_id)
    row = Attachment.objects.get(pk=attachment_id)
    assert args[1:] == [str(row.tenant_id), row.subject]  # the tenant and the subject ride along
    with _statements(capture) as seen["intake"]:
        actors.intake.fn(*args)
    assert Attachment.objects.get(pk=attachment_id).step == "derive"
    args = _sent("derive", attachment_id)
    with _statements(capture) as seen["derive"]:
        actors.derive.fn(*args)
    assert Attachment.objects.get(pk=attachment_id).status == "ready"
    return seen


# Intake (which runs the scan): the step's read, the row's UPDATE (guarded by what the read saw: no
# lock read), the audit rows (the arrival, the scan and the start in one INSERT), the outbox row and its
# "sent" mark; intake and scan as two stages took 11 (the scan: a hand-over UPDATE guarded by its lease,
# its audit row, its job). Derive: the step's read, the flip to ready guarded by the lease (no lock
# read either), the derivative rows instead of a job to send.
EXPECTED = {
    "intake": {"SELECT": 1, "UPDATE": 2, "INSERT": 2},
    # Derivatives upserted in one INSERT; the duplicate rule's one probe of att_ready_sha256 as the file
    # becomes ready (services/duplicates.py) is a subquery of the flip's UPDATE (a profile that rejects
    # duplicates reads it first), and the resource then reads the flag from the row for nothing.
    "derive": {"SELECT": 1, "INSERT": 2, "UPDATE": 1},
}


def _is_twin_lookup(sql: str) -> bool:
    """The duplicate rule's read: by (tenant, sha256) among ready files, the earliest-created first."""
    return '."sha256" =' in sql and "LIMIT 1" in sql.upper()  # the table's name, or its alias in a subquery


def test_statements_per_step_for_an_image(alice, api, memory_slots, django_capture_on_commit_callbacks):
    attachment_id = uuid.UUID(upload(api(alice), jpeg_bytes((64, 48))))
    seen = _through_the_steps(attachment_id, django_capture_on_commit_callbacks)
    assert {step: _verbs(sqls) for step, sqls in seen.items()} == EXPECTED, seen
    every = [sql for sqls in seen.values() for sql in sqls]
    assert not _selects_text(every)
    # Reads by primary key build no ORDER BY (the twin lookup's is its rule); UPDATEs leave untouched columns alone.
    selects = [sql for sql in every if sql.lstrip().upper().startswith("SELECT")]
    [flip] = [sql for sql in seen["derive"] if sql.lstrip().upper().startswith("UPDATE")]
    assert _is_twin_lookup(flip) and '"duplicate_of" = (SELECT' in flip, flip  # the rule, in the flip itself
    assert not [sql for sql in selects if _is_twin_lookup(sql)]
    assert not [sql for sql in selects if "ORDER BY" in sql.upper() and not _is_twin_lookup(sql)]
    assert not [sql for sql in every if sql.lstrip().upper().startswith("UPDATE") and '"filename"' in sql]
    assert Derivative.objects.filter(attachment_id=attachment_id).count() == 2


def test_a_pdf_writes_its_text_without_ever_reading_it(alice, api, memory_slots, django_capture_on_commit_callbacks):
    from attachments.services.moderation import attachment_reprocess

    attachment_id = uuid.UUID(
        upload(
            api(alice),
            pdf_bytes("searchable words here"),
            profile="document",
            filename="a.pdf",
            content_type="application/pdf",
        )
    )
    seen = _through_the_steps(attachment_id, django_capture_on_commit_callbacks)
    assert {step: _verbs(sqls) for step, sqls in seen.items()} == EXPECTED, seen
    assert "searchable" in Attachment.objects.get(pk=attachment_id).text

    # Reprocessed: the row now holds its text, and no step reads it back.
    attachment_reprocess(attachment_id=attachment_id, actor="staff:test")
    seen = _through_the_steps(attachment_id, django_capture_on_commit_callbacks)
    assert {step: _verbs(sqls) for step, sqls in seen.items()} == EXPECTED, seen
    assert not _selects_text([sql for sqls in seen.values() for sql in sqls])


def test_a_second_attempt_replaces_the_derivative_rows(alice, api, memory_slots):
    from attachments.services.moderation import attachment_reprocess

    attachment_id = upload(api(alice), jpeg_bytes((64, 48)))
    assert run_pipeline(attachment_id) == "ready"
    first = {d.kind: d for d in Derivative.objects.filter(attachment_id=attachment_id)}
    attachment_reprocess(attachment_id=attachment_id, actor="staff:test")
    assert run_pipeline(attachment_id) == "ready"
    second = {d.kind: d for d in Derivative.objects.filter(attachment_id=attachment_id)}
    assert set(first) == set(second) == {"thumbnail", "sanitized"}
    for kind, row in second.items():
        assert row.pk == first[kind].pk and row.storage_key == first[kind].storage_key
        assert row.created_at > first[kind].created_at  # written by the second attempt


def test_a_derive_job_over_its_tenants_cap_is_parked_without_a_query(alice, api, memory_slots, monkeypatch, settings):
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=1)
    attachment_id = uuid.UUID(upload(api(alice), jpeg_bytes((64, 48))))
    actors.intake.fn(str(attachment_id))
    args = _sent("derive", attachment_id)
    row = Attachment.objects.get(pk=attachment_id)
    assert args == [str(row.pk), str(row.lease_token), str(row.tenant_id), row.subject]  # tenant and subject ride along
    resent: list[tuple] = []
    monkeypatch.setattr(actors.derive, "send", lambda *a: resent.append(a))
    assert memory_slots.acquire_or_park(str(row.tenant_id), "busy", "-", limit=1, ttl_ms=60_000, park_ttl_ms=60_000)
    with CaptureQueriesContext(connection) as ctx:
        actors.derive.fn(*args)
    assert ctx.captured_queries == []  # parked: the database was never asked
    assert Attachment.objects.get(pk=attachment_id).step == "derive"
    assert memory_slots.release(str(row.tenant_id), "busy") == tenant_slots.encode((*args, "derive"))
    actors.derive.fn(*args)  # what the release hands back is sent again, and runs
    assert Attachment.objects.get(pk=attachment_id).status == "ready"


def test_malformed_derive_messages_are_dead_lettered(db):
    from attachments.models import DeadLetter

    for args in [
        ("x", "y"),
        (str(uuid.uuid4()),),
        (str(uuid.uuid4()), str(uuid.uuid4()), "acme"),
        (str(uuid.uuid4()), str(uuid.uuid4()), "1", "ann", "2"),
    ]:
        actors.derive.fn(*args)
    assert DeadLetter.objects.filter(kind="message").count() == 4


def test_a_stale_derive_job_takes_no_slot_and_changes_nothing(alice, api, memory_slots, monkeypatch, settings):
    """Messages sent before the tenant rode along: the row is read first, and a stale job stops there."""
    # a subject's share (3 − 1 = 2) is a pool of its own
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=3)
    attachment_id = upload(api(alice), jpeg_bytes((64, 48)))
    pipeline.start_and_intake(uuid.UUID(attachment_id))  # intake runs the scan: derive is next
    row = Attachment.objects.get(pk=attachment_id)
    asked: list[str] = []
    monkeypatch.setattr(memory_slots, "acquire_or_park", lambda tenant, *a, **k: asked.append(tenant) or True)
    actors.derive.fn(str(row.pk), str(uuid.uuid4()))  # an old attempt's token
    actors.derive.fn(str(uuid.uuid4()), str(row.lease_token))  # no such file
    assert asked == []
    after = Attachment.objects.get(pk=attachment_id)
    assert (after.status, after.step, after.lease_token) == ("processing", "derive", row.lease_token)
    actors.derive.fn(str(row.pk), str(row.lease_token))
    # The row read gives the subject too: its pool (tenant's 3 − 1 slots) after the tenant's.
    assert asked == [str(row.tenant_id), f"{row.tenant_id}/{row.subject}"]
    assert Attachment.objects.get(pk=attachment_id).status == "ready"


# --- saving only what changed -------------------------------------------------------


def _pending_row(alice) -> uuid.UUID:
    from tests.support import client_for, create_intent

    return uuid.UUID(create_intent(client_for(alice), size=10).json()["id"])


def test_the_transition_lock_reads_only_its_named_columns(alice):
    """lock_attachment reads Attachment.objects.for_transition(): no text, no client claims, no ORDER BY."""
    attachment_id = _pending_row(alice)
    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        lock_attachment(attachment_id)
    [select] = [q["sql"] for q in ctx.captured_queries if q["sql"].upper().startswith("SELECT")]
    assert ("FOR UPDATE" in select.upper()) == connection.features.has_select_for_update, select
    assert "ORDER BY" not in select.upper(), select
    for column in ("status", "lease_token", "step", "attempts", "reason_code"):
        assert f'"{column}"' in select.split("FROM")[0], select
    for column in ("text", "filename", "metadata", "declared_type"):
        assert f'"{column}"' not in select.split("FROM")[0], select


def test_a_transition_writes_only_the_columns_it_declares(alice):
    attachment_id = _pending_row(alice)
    before = Attachment.objects.get(pk=attachment_id).updated_at
    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        attachment = lock_attachment(attachment_id)
        apply_transition(
            attachment, "start", actor="test", lease_token=uuid.uuid4(), lease_expires_at=before, step="intake"
        )
    [update] = [q["sql"] for q in ctx.captured_queries if q["sql"].upper().startswith("UPDATE")]
    for column in ("status", "lease_token", "lease_expires_at", "step", "updated_at"):
        assert f'"{column}"' in update.split("WHERE")[0], update
    for column in ("filename", "metadata", "text", "storage_key", "lifecycle"):
        assert f'"{column}"' not in update.split("WHERE")[0], update
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.step) == ("processing", "intake") and row.updated_at > before


def test_the_facts_given_to_a_transition_are_saved_and_nothing_else(alice):
    """`fields=` (a step's facts) are set and written with the transition; other columns set are not."""
    attachment_id = _pending_row(alice)
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        attachment.filename = "not-saved.jpg"  # set, but not named
        apply_transition(
            attachment, "reject", actor="test", code="corrupt", message="bad", fields={"sha256": "ab" * 32}
        )
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.sha256, row.filename) == ("rejected", "ab" * 32, "cat.jpg")


def test_a_narrow_save_still_refuses_a_row_whose_status_moved_on(alice):
    """ConcurrentTransitionMixin's guard (the status the row was read with) holds for partial saves."""
    attachment_id = _pending_row(alice)
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        attachment = lock_attachment(attachment_id)
        Attachment.objects.filter(pk=attachment_id).update(status="rejected")  # behind its back
        apply_transition(attachment, "start", actor="test", lease_token=uuid.uuid4(), lease_expires_at=None)
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.lease_token) == ("pending", None)
    assert not row.transitions.exclude(transition="intent").exists()


def test_a_narrow_read_builds_its_rows_with_their_status_in_one_query(alice):
    """Without `status`, ConcurrentTransitionMixin would load it with one query per row."""
    for _ in range(3):
        _pending_row(alice)
    with CaptureQueriesContext(connection) as ctx:
        rows = list(Attachment.objects.only("pk", "lifecycle"))
    assert len(ctx.captured_queries) == 1 and [r.status for r in rows] == ["pending"] * 3


# --- the scan's guarded hand-over ----------------------------------------------------


@pytest.mark.parametrize("meanwhile", ["lease_taken_over", "discarded"])
def test_a_scan_whose_row_moved_on_during_its_work_changes_nothing(alice, api, memory_slots, monkeypatch, meanwhile):
    """The hand-over's UPDATE re-checks the lease, the stage and the lifecycle that the lock read used to."""
    from attachments.models import Lifecycle, OutboxMessage

    attachment_id = uuid.UUID(upload(api(alice), jpeg_bytes((64, 48))))
    actors.intake.fn(*_sent("intake", attachment_id))
    # A row left at the scan stage by a job sent before intake ran the scan (the stage is kept for them).
    Attachment.objects.filter(pk=attachment_id).update(step="scan", scanned_at=None)
    OutboxMessage.objects.filter(actor_name="derive", args__0=str(attachment_id)).delete()
    row = Attachment.objects.get(pk=attachment_id)
    other_token = uuid.uuid4()
    work = pipeline.WORK["scan"]

    def scan_then_move_on(attachment):
        result = work(attachment)
        if meanwhile == "discarded":
            Attachment.objects.filter(pk=attachment_id).update(lifecycle=Lifecycle.DISCARDED)
        else:  # the lease ran out and another attempt took the row
            Attachment.objects.filter(pk=attachment_id).update(lease_token=other_token)
        return result

    monkeypatch.setitem(pipeline.WORK, "scan", scan_then_move_on)
    assert pipeline.run_stage(row.pk, row.lease_token, "scan") == "stale"
    after = Attachment.objects.get(pk=attachment_id)
    assert not OutboxMessage.objects.filter(actor_name="derive", args__0=str(attachment_id)).exists()
    assert after.scanned_at is None
    if meanwhile == "discarded":
        assert (after.status, after.reason_code) == ("rejected", "object_missing")
    else:
        assert (after.status, after.step, after.lease_token) == ("processing", "scan", other_token)


# --- the flips decided from the stage's read, with no lock read -----------------------


def _counter_is_exact(tenant_id) -> None:
    from attachments.models import TenantUsage
    from attachments.services.quotas import usage_recounted

    counter = TenantUsage.objects.get(tenant_id=tenant_id)
    assert (counter.bytes_used, counter.files_used) == usage_recounted(tenant_id)


def _at_derive(client) -> Attachment:
    attachment_id = uuid.UUID(upload(client, jpeg_bytes((64, 48))))
    actors.intake.fn(*_sent("intake", attachment_id))
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.step) == ("processing", "derive")
    return row


@pytest.mark.parametrize("meanwhile", ["lease_taken_over", "discarded"])
def test_a_derive_whose_row_moved_on_during_its_work_changes_nothing(alice, api, memory_slots, monkeypatch, meanwhile):
    """The flip to ready re-checks the lease and the lifecycle the stage read; a stale job writes no derivative."""
    from attachments.services.lifecycle import attachment_discard

    row = _at_derive(api(alice))
    other_token = uuid.uuid4()
    work = pipeline.WORK["derive"]

    def derive_then_move_on(attachment):
        result = work(attachment)
        if meanwhile == "discarded":
            attachment_discard(user=alice, attachment_id=row.pk)
        else:  # the lease ran out and another attempt took the row
            Attachment.objects.filter(pk=row.pk).update(lease_token=other_token)
        return result

    monkeypatch.setitem(pipeline.WORK, "derive", derive_then_move_on)
    assert pipeline.run_stage(row.pk, row.lease_token, "derive") == "stale"
    after = Attachment.objects.get(pk=row.pk)
    assert not Derivative.objects.filter(attachment_id=row.pk).exists()
    if meanwhile == "discarded":
        assert (after.status, after.reason_code) == ("rejected", "object_missing")
    else:
        assert (after.status, after.step, after.lease_token) == ("processing", "derive", other_token)
    _counter_is_exact(row.tenant_id)


def test_a_file_committed_during_derive_is_judged_in_its_ref(alice, api, memory_slots, monkeypatch):
    """Committed while derive ran: the duplicate rule looks in the ref the row has now, not the one it was read with."""
    from tests.refs.archive_support import commit

    client = api(alice)
    first = _at_derive(client)
    assert pipeline.run_stage(first.pk, first.lease_token, "derive") == "ready"  # the same subject, in no ref
    row = _at_derive(client)
    work = pipeline.WORK["derive"]

    def derive_then_commit(attachment):
        result = work(attachment)
        commit(client, [str(row.pk)], "wedding")
        return result

    monkeypatch.setitem(pipeline.WORK, "derive", derive_then_commit)
    assert pipeline.run_stage(row.pk, row.lease_token, "derive") == "ready"
    after = Attachment.objects.get(pk=row.pk)
    assert (after.ref, after.lifecycle, after.duplicate_of) == ("wedding", "committed", None)
    assert Derivative.objects.filter(attachment_id=row.pk).count() == 2
    _counter_is_exact(row.tenant_id)


def test_an_intake_whose_file_was_discarded_meanwhile_starts_nothing(alice, api, memory_slots, monkeypatch):
    """The start re-checks that the file is still startable (not discarded) in its UPDATE; the usage stays exact."""
    from attachments.models import OutboxMessage
    from attachments.services.lifecycle import attachment_discard

    attachment_id = uuid.UUID(upload(api(alice), jpeg_bytes((64, 48))))
    work = pipeline.intake

    def intake_then_discard(attachment):
        result = work(attachment)
        attachment_discard(user=alice, attachment_id=attachment_id)
        return result

    monkeypatch.setattr(pipeline, "intake", intake_then_discard)
    assert pipeline.start_and_intake(attachment_id) == "skipped"
    after = Attachment.objects.get(pk=attachment_id)
    assert (after.status, after.lifecycle, after.lease_token) == ("pending", "discarded", None)
    assert not OutboxMessage.objects.filter(actor_name="derive", args__0=str(attachment_id)).exists()
    assert not after.transitions.filter(transition="start").exists()
    _counter_is_exact(after.tenant_id)
