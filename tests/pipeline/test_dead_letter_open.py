"""attachments/retention/services/dead_letters.py: the one place a dead letter is opened."""

from __future__ import annotations

import pytest

from attachments.models import DeadLetter
from attachments.retention.services.dead_letters import LAST_ERROR_LIMIT, dead_letter_open


def test_opens_an_unresolved_letter_with_what_it_was_given(db):
    letter = dead_letter_open(
        kind=DeadLetter.Kind.MESSAGE, last_error="malformed scan message", payload={"actor": "scan", "args": ["'x'"]}
    )
    stored = DeadLetter.objects.get(pk=letter.pk)
    assert (stored.kind, stored.last_error, stored.payload, stored.history) == (
        "message",
        "malformed scan message",
        {"actor": "scan", "args": ["'x'"]},
        [],
    )
    assert stored.resolved_at is None and stored.attachment_id is None


def test_a_runaway_error_is_capped(db):
    letter = dead_letter_open(kind=DeadLetter.Kind.SWEEP, last_error="e" * (LAST_ERROR_LIMIT + 10))
    assert len(DeadLetter.objects.get(pk=letter.pk).last_error) == LAST_ERROR_LIMIT


def test_an_unknown_kind_is_refused(db):
    with pytest.raises(ValueError, match="unknown dead letter kind"):
        dead_letter_open(kind="typo", last_error="x")
    assert not DeadLetter.objects.exists()
