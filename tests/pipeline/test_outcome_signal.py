"""Outcomes reach other apps through attachments.hooks.outcome_reached, inside the change's transaction."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction

from attachments import hooks
from attachments.models import Attachment
from attachments.services.transitions import apply_transition, lock_attachment
from tests.support import client_for, create_intent

pytestmark = pytest.mark.django_db


@pytest.fixture
def heard():
    received: list[tuple[str, list]] = []

    def receiver(sender, *, outcome, ids, **kwargs):
        received.append((outcome, list(ids)))

    hooks.outcome_reached.connect(receiver, dispatch_uid="test.heard")
    yield received
    hooks.outcome_reached.disconnect(dispatch_uid="test.heard")


def _pending(alice) -> uuid.UUID:
    return uuid.UUID(create_intent(client_for(alice), size=10).json()["id"])


def test_a_rejection_is_heard_with_the_attachments_id(alice, heard):
    attachment_id = _pending(alice)
    with transaction.atomic():
        apply_transition(lock_attachment(attachment_id), "reject", actor="test", code="corrupt", message="bad")
    assert heard == [("rejected", [attachment_id])]


def test_a_receiver_that_raises_aborts_the_change(alice):
    attachment_id = _pending(alice)

    def refuse(sender, **kwargs):
        raise RuntimeError("receiver failed")

    hooks.outcome_reached.connect(refuse, dispatch_uid="test.refuse")
    try:
        with pytest.raises(RuntimeError, match="receiver failed"), transaction.atomic():
            apply_transition(lock_attachment(attachment_id), "reject", actor="test", code="corrupt", message="bad")
    finally:
        hooks.outcome_reached.disconnect(dispatch_uid="test.refuse")
    row = Attachment.objects.get(pk=attachment_id)
    assert row.status == "pending"
    assert not row.transitions.filter(transition="reject").exists()


def test_an_unknown_outcome_is_refused(heard):
    with pytest.raises(ValueError, match="unknown outcome"):
        hooks.announce("exploded", [1])
    assert heard == []
