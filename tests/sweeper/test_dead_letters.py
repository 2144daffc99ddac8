"""Sweep dead letters go somewhere: retry deletes the objects (or says why not), resolve needs them gone or
abandoned."""

from __future__ import annotations

import pytest

from attachments.models import Attachment, DeadLetter, Lifecycle
from attachments.storage import get_gateway
from sweeper import reaping
from sweeper.control import sweeper_control_set
from sweeper.dead_letters import (
    DeadLetterRefused,
    sweep_dead_letter_abandon,
    sweep_dead_letter_resolve,
    sweep_dead_letter_retry,
)
from sweeper.sweep import sweep_expired
from tests.sweeper.support import DAY, T0, CountingGateway, files_of, make_attachment

pytestmark = pytest.mark.django_db

LATER = T0 + 8 * DAY


@pytest.fixture
def stuck(alice, monkeypatch):
    """A row whose thumbnail storage refused to delete: dead-lettered at the first attempt."""
    monkeypatch.setattr(reaping, "DELETE_ATTEMPTS", 1)
    attachment = make_attachment(alice)
    thumb = attachment.derivatives.get().storage_key
    gateway = CountingGateway(fail=[thumb])
    assert sweep_expired(now=LATER, gateway=gateway).dead_lettered == 1
    assert files_of(attachment) == {thumb}
    return attachment, DeadLetter.objects.get(kind="sweep"), gateway


def test_retry_deletes_the_objects_marks_the_row_deleted_and_resolves(stuck):
    attachment, letter, gateway = stuck
    gateway.fail.clear()  # the bucket policy got fixed
    result = sweep_dead_letter_retry(dead_letter_id=letter.pk, actor="staff:ops", gateway=gateway)
    assert result.resolved and not result.failed
    assert files_of(attachment) == set()
    attachment.refresh_from_db()
    letter.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.DELETED and attachment.deleted_at is not None
    assert letter.resolved_by == "staff:ops" and letter.history[-1]["result"] == "deleted"
    with pytest.raises(DeadLetterRefused, match="not an open sweep dead letter"):
        sweep_dead_letter_retry(dead_letter_id=letter.pk, actor="staff:ops", gateway=gateway)


def test_retry_that_still_fails_says_which_key_and_why_and_keeps_the_letter_open(stuck):
    attachment, letter, gateway = stuck
    result = sweep_dead_letter_retry(dead_letter_id=letter.pk, actor="staff:ops", gateway=gateway)
    thumb = attachment.derivatives.get().storage_key
    assert not result.resolved and list(result.failed) == [thumb] and "injected failure" in result.failed[thumb]
    letter.refresh_from_db()
    attachment.refresh_from_db()
    assert letter.resolved_at is None and letter.history[-1]["result"] == "failed"
    assert attachment.lifecycle == Lifecycle.STAGED


@pytest.mark.parametrize("brake", ["killswitch", "dry_run"])
def test_retry_obeys_the_brakes(stuck, brake):
    attachment, letter, gateway = stuck
    gateway.fail.clear()
    sweeper_control_set(**{brake: True}, actor="test")
    calls = sum(gateway.calls.values())
    result = sweep_dead_letter_retry(dead_letter_id=letter.pk, actor="staff:ops", gateway=gateway)
    assert not result.resolved and "nothing deleted" in result.reason
    assert sum(gateway.calls.values()) == calls and files_of(attachment)
    letter.refresh_from_db()
    assert letter.resolved_at is None


def test_resolve_is_refused_while_objects_remain_and_allowed_once_they_are_gone(stuck):
    attachment, letter, _gateway = stuck
    with pytest.raises(DeadLetterRefused, match="1 object\\(s\\) still stored"):
        sweep_dead_letter_resolve(dead_letter_id=letter.pk, actor="staff:ops")
    letter.refresh_from_db()
    assert letter.resolved_at is None
    for key in files_of(attachment):  # someone removed it by hand
        get_gateway().delete(key)
    sweep_dead_letter_resolve(dead_letter_id=letter.pk, actor="staff:ops")
    letter.refresh_from_db()
    assert letter.resolved_by == "staff:ops"
    assert Attachment.objects.get(pk=attachment.pk).lifecycle == Lifecycle.DELETED


def test_abandoning_needs_a_reason_and_is_audited(stuck):
    attachment, letter, _gateway = stuck
    with pytest.raises(DeadLetterRefused, match="needs a reason"):
        sweep_dead_letter_abandon(dead_letter_id=letter.pk, actor="staff:ops", reason="  ")
    sweep_dead_letter_abandon(dead_letter_id=letter.pk, actor="staff:ops", reason="bucket gone with the vendor")
    letter.refresh_from_db()
    assert letter.resolved_by == "staff:ops"
    assert letter.payload["abandoned"]["reason"] == "bucket gone with the vendor"
    assert letter.history[-1]["action"] == "abandon"
    assert Attachment.objects.get(pk=attachment.pk).lifecycle == Lifecycle.DELETED
    assert files_of(attachment)  # abandoned, not deleted: reconcile keeps trying the leftovers


def test_retry_of_a_file_held_since_is_refused_and_deletes_nothing(stuck):
    from attachments.retention.services.holds import attachment_hold_set

    attachment, letter, gateway = stuck
    gateway.fail.clear()
    attachment_hold_set(attachment_ids=[attachment.pk], actor="staff:root", reason="litigation")
    with pytest.raises(DeadLetterRefused, match="legal hold"):
        sweep_dead_letter_retry(dead_letter_id=letter.pk, actor="staff:ops", gateway=gateway)
    assert files_of(attachment) == {attachment.derivatives.get().storage_key}
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.STAGED


@pytest.mark.parametrize("how", ["abandon", "resolve"])
def test_closing_the_letter_of_a_file_held_since_is_refused(stuck, how):
    """Abandon (and resolve) mark the row deleted, and reconcile deletes a deleted row's leftovers: not while held."""
    from attachments.retention.services.holds import attachment_hold_set

    attachment, letter, _gateway = stuck
    attachment_hold_set(attachment_ids=[attachment.pk], actor="staff:root", reason="litigation")
    if how == "resolve":
        for key in files_of(attachment):  # gone by hand: resolve would otherwise close it
            get_gateway().delete(key)
    with pytest.raises(DeadLetterRefused, match="legal hold"):
        if how == "abandon":
            sweep_dead_letter_abandon(dead_letter_id=letter.pk, actor="staff:ops", reason="vendor gone")
        else:
            sweep_dead_letter_resolve(dead_letter_id=letter.pk, actor="staff:ops")
    letter.refresh_from_db()
    attachment.refresh_from_db()
    assert letter.resolved_at is None and "abandoned" not in letter.payload
    assert attachment.lifecycle == Lifecycle.STAGED
