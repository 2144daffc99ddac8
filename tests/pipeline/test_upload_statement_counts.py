"""What the upload side costs per file, pinned so that a statement or a commit that comes back fails here.

tests/pipeline/test_statement_counts.py pins the worker's steps; this file pins
the intent and the signed PUT with its arrival (bench/capacity.py's "intent" and
"put" phases). Statements are counted by verb, in order; commits as the
database makes them: each write outside a transaction, and each transaction
that wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from django.db import connection

from attachments.models import OutboxMessage
from attachments.services import backlog, outbox
from tests.support import create_intent, jpeg_bytes, put_bytes

pytestmark = pytest.mark.django_db(transaction=True)

_TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


@dataclass
class Counted:
    statements: list[str] = field(default_factory=list)
    commits: int = 0

    @property
    def verbs(self) -> list[str]:
        return [sql.lstrip().split(None, 1)[0].upper() for sql in self.statements]

    def tables(self, verb: str) -> list[str]:
        """The attachments_* tables the statements of this verb name first."""
        found = []
        for sql in self.statements:
            if sql.lstrip().upper().startswith(verb):
                found.append(next(w.strip('"') for w in sql.split() if w.strip('"').startswith("attachments_")))
        return found


@contextmanager
def _counted() -> Iterator[Counted]:
    """Every statement this connection runs in the block, and the commits that made writes durable."""
    counted = Counted()
    wrote = [False]

    def wrapper(execute, sql, params, many, context):
        if not sql.lstrip().upper().startswith(_TRANSACTION_CONTROL):
            counted.statements.append(sql)
            if not sql.lstrip().upper().startswith("SELECT"):
                if connection.in_atomic_block:
                    wrote[0] = True
                else:
                    counted.commits += 1  # autocommit: the statement is its own transaction
        return execute(sql, params, many, context)

    real_commit = connection.commit

    def commit() -> None:
        if wrote[0]:
            counted.commits += 1
        wrote[0] = False
        real_commit()

    connection.commit = commit  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(wrapper):
            yield counted
    finally:
        del connection.commit  # the class's method again


@pytest.fixture
def bulk_marks(monkeypatch):
    """Sent marks as serve and the workers write them: later, in bulk, not in the request."""
    monkeypatch.setattr(outbox, "SENT_MARK_DELAY_S", 60)
    yield
    outbox.flush_sent_marks()


def test_the_intent_is_two_statements_on_postgresql_and_one_commit(alice, monkeypatch, bulk_marks):
    from attachments.uploads.services.intents import upload_intent_create

    def intent():
        return upload_intent_create(
            user=alice, profile_name="image", filename="cat.jpg", size=100, content_type="image/jpeg"
        )

    intent()  # the tenant's first use: its usage row exists from here on
    # The brake's answer is kept 0.25 s per process and tenant (under load most intents read none): read here.
    monkeypatch.setattr(backlog, "_cached", {})
    with _counted() as counted:
        intent()
    if connection.vendor == "postgresql":
        # The backlog brake, then the pending-uploads limit, the quota, the row and its audit entry in one statement.
        assert counted.verbs == ["SELECT", "WITH"], counted.statements
    else:
        # SQLite: the brake, the pending-uploads limit, then the quota, the row and its audit entry,
        # one statement each, in one transaction.
        assert counted.verbs == ["SELECT", "SELECT", "UPDATE", "INSERT", "INSERT"], counted.statements
    assert counted.commits == 1


def test_a_signed_put_reads_the_row_once_and_commits_once(alice, api, monkeypatch, bulk_marks):
    data = jpeg_bytes((64, 48))
    intent = create_intent(api(alice), size=len(data)).json()
    with _counted() as counted:
        response = put_bytes(intent["upload"]["url"], data, content_type="image/jpeg")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "pending"
    # The row; then, once the bytes are in, uploaded_at (taking the row's lock), the event and the
    # intake job, in one transaction. The job's "sent" mark waits for the bulk flush.
    assert counted.verbs == ["SELECT", "UPDATE", "INSERT", "INSERT"], counted.statements
    assert counted.tables("UPDATE") == ["attachments_attachment"]
    assert counted.tables("INSERT") == ["attachments_storageevent", "attachments_outboxmessage"]
    assert counted.commits == 1
    assert OutboxMessage.objects.filter(actor_name="intake", sent_at__isnull=True).count() == 1
    assert outbox.flush_sent_marks() == 1
